"""Scripted-model rules of the session notepad: the offline model learns to use its notepad.

After the tool call, the built-in results rule reports what the tool returned.
"""

from __future__ import annotations

import re

from memory_app.notepad.prompts import NOTEPAD_HEADING
from sessions_app.common.content import content_text
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_REMEMBER_RE = re.compile(r"^remember:\s*(.+)$", re.DOTALL | re.IGNORECASE)
_FORGET_RE = re.compile(r"^forget:\s*(.+)$", re.DOTALL | re.IGNORECASE)
NOTEPAD_OFF_REPLY = "I have no session notepad in this session (it is switched off)."


def _latest_message_text(inp: ScriptedInput) -> str:
    messages = inp.body.get("messages") or [{}]
    return content_text(messages[-1].get("content"))


def _visible_notepad(inp: ScriptedInput) -> str:
    """The notepad as the request shows it (system prompt or latest user message), else ""."""
    for place in (inp.system_text, _latest_message_text(inp)):
        _, found, after = place.partition(NOTEPAD_HEADING + "\n")
        if found:
            return after
    return ""


@scripted_rule("remember: TEXT: I append the line TEXT to my session notepad (update_notepad)")
def rule_remember(inp: ScriptedInput) -> ScriptedReply | None:
    match = _REMEMBER_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if "update_notepad" not in inp.tool_names:
        return ScriptedReply(text=NOTEPAD_OFF_REPLY)
    line = match.group(1).strip()
    return ScriptedReply(
        text="Noting that in my notepad.",
        tool_uses=[("update_notepad", {"operation": "append", "content": line + "\n"})],
    )


@scripted_rule("forget: TEXT: I delete TEXT (its whole line if it has one) from my notepad")
def rule_forget(inp: ScriptedInput) -> ScriptedReply | None:
    match = _FORGET_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if "update_notepad" not in inp.tool_names:
        return ScriptedReply(text=NOTEPAD_OFF_REPLY)
    text = match.group(1).strip()
    # Like a model reading its notepad: remove the line `remember:` wrote, not just its words.
    doomed = text + "\n" if text + "\n" in _visible_notepad(inp) else text
    return ScriptedReply(
        text="Removing that from my notepad.",
        tool_uses=[("update_notepad", {"operation": "delete", "content": doomed})],
    )


@scripted_rule("notepad: I read my session notepad (read_notepad)")
def rule_notepad(inp: ScriptedInput) -> ScriptedReply | None:
    if (inp.user_text or "").strip().lower() != "notepad":
        return None
    if "read_notepad" not in inp.tool_names:
        return ScriptedReply(text=NOTEPAD_OFF_REPLY)
    return ScriptedReply(text="Reading my notepad.", tool_uses=[("read_notepad", {})])
