"""Scripted-model rules of the session notepad: the offline model learns to use its notepad.

After the tool call, the built-in results rule reports what the tool returned.
"""

from __future__ import annotations

import re
from typing import Any

from memory_app.notepad.prompts import NOTEPAD_CHANGED_LEAD, NOTEPAD_EMPTY_HINT, NOTEPAD_HEADING
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_REMEMBER_RE = re.compile(r"^remember:\s*(.+)$", re.DOTALL | re.IGNORECASE)
_FORGET_RE = re.compile(r"^forget:\s*(.+)$", re.DOTALL | re.IGNORECASE)
NOTEPAD_OFF_REPLY = "I have no session notepad in this session (it is switched off)."


def _text_blocks(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _visible_notepad(inp: ScriptedInput) -> str:
    """The notepad as the request shows it, else "" (no notepad section in the request).

    Read from the section's own block (in the system prompt, or before the latest user message):
    the blocks after it (other sections, the user's own words) are no part of it, and the
    empty-notepad hint is no note."""
    messages = inp.body.get("messages") or [{}]
    # Position `epoch`: the system prompt holds the epoch's copy, and each change since is a
    # copy in the history, after words that say so, where it was first shown.
    copies = [
        block
        for message in messages[:-1]
        for block in _text_blocks(message.get("content"))
        if block.startswith(NOTEPAD_CHANGED_LEAD)
    ]
    blocks = [*_text_blocks(inp.body.get("system")), *copies, *_text_blocks(messages[-1].get("content"))]
    # The last section is the current one.
    content = None
    for block in blocks:
        if block.startswith(NOTEPAD_HEADING + "\n"):
            content = block[len(NOTEPAD_HEADING) + 1 :]
        elif block.startswith(NOTEPAD_CHANGED_LEAD) and f"{NOTEPAD_HEADING}\n" in block:
            content = block.split(f"{NOTEPAD_HEADING}\n", 1)[1]
    return "" if content is None or content == NOTEPAD_EMPTY_HINT else content


def _lines_containing(notepad: str, text: str) -> list[str]:
    """Each distinct line of `notepad` that contains `text`, with its newline (the last line may
    have none), longest first.

    `update_notepad`'s delete removes every occurrence of its content, and a line may end with a
    shorter one ("old Q3\n" ends with "Q3\n"). Any line holding a doomed line holds `text` too and
    is longer, so it is gone before the shorter one is deleted: each delete removes whole lines."""
    parts = notepad.split("\n")
    lines = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return sorted({line for line in lines if text in line}, key=lambda line: (-len(line), line))


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


@scripted_rule("forget: TEXT: I delete every line of my notepad that contains TEXT (update_notepad)")
def rule_forget(inp: ScriptedInput) -> ScriptedReply | None:
    match = _FORGET_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if "update_notepad" not in inp.tool_names:
        return ScriptedReply(text=NOTEPAD_OFF_REPLY)
    text = match.group(1).strip()
    # Like a model reading its notepad: remove the whole lines that hold the text, not just its
    # words (forgetting "Q3 totals" of "Q3 totals are wrong in row 12" left " are wrong in row
    # 12"). Text that no line holds (absent, or spanning lines) is deleted as given: the tool
    # removes it or says it does not occur.
    doomed = _lines_containing(_visible_notepad(inp), text) or [text]
    return ScriptedReply(
        text="Removing that from my notepad.",
        tool_uses=[("update_notepad", {"operation": "delete", "content": line}) for line in doomed],
    )


@scripted_rule("notepad: I read my session notepad (read_notepad)")
def rule_notepad(inp: ScriptedInput) -> ScriptedReply | None:
    if (inp.user_text or "").strip().lower() != "notepad":
        return None
    if "read_notepad" not in inp.tool_names:
        return ScriptedReply(text=NOTEPAD_OFF_REPLY)
    return ScriptedReply(text="Reading my notepad.", tool_uses=[("read_notepad", {})])
