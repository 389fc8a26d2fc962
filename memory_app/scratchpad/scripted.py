"""The scripted model learns the scratchpad (README, "The scripted model"):
- `plan: a; b; c` sets the plan to a numbered list (`1. a`, `2. b`, `3. c`);
- `note: TEXT` appends TEXT to the notes;
- `ref: X` adds X to the refs;
- `scratchpad` says what the scratchpad block of this request holds.
"""

from __future__ import annotations

import re

from memory_app.scratchpad import prompts
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

SCRATCHPAD_OFF = "My scratchpad is switched off in this session."


def _numbered(plan: str) -> str:
    steps = [step.strip() for step in plan.split(";") if step.strip()]
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, start=1))


def _command(inp: ScriptedInput, keyword: str) -> str | None:
    """The text after `keyword:` when the user's message is that command."""
    if inp.user_text is None:
        return None
    match = re.match(rf"^{keyword}:\s*(.*)$", inp.user_text.strip(), re.IGNORECASE | re.DOTALL)
    return match.group(1).strip() if match else None


def _call(inp: ScriptedInput, text: str, tool_input: dict) -> ScriptedReply:
    if prompts.TOOL_NAME not in inp.tool_names:
        return ScriptedReply(text=SCRATCHPAD_OFF)
    return ScriptedReply(text=text, tool_uses=[(prompts.TOOL_NAME, tool_input)])


@scripted_rule(help_line="plan: a; b; c: I save the plan 1. a / 2. b / 3. c in my scratchpad")
def scratchpad_plan(inp: ScriptedInput) -> ScriptedReply | None:
    plan = _command(inp, "plan")
    if plan is None:
        return None
    return _call(inp, "Saving the plan to my scratchpad.", {"action": "set_plan", "content": _numbered(plan)})


@scripted_rule(help_line="note: TEXT: I append TEXT to the notes in my scratchpad")
def scratchpad_note(inp: ScriptedInput) -> ScriptedReply | None:
    note = _command(inp, "note")
    if note is None:
        return None
    return _call(inp, "Noting that in my scratchpad.", {"action": "append_notes", "content": note})


@scripted_rule(help_line="ref: X: I add X to the refs in my scratchpad")
def scratchpad_ref(inp: ScriptedInput) -> ScriptedReply | None:
    ref = _command(inp, "ref")
    if ref is None:
        return None
    return _call(inp, "Adding that ref to my scratchpad.", {"action": "refs.add", "ref": ref})


def _block_in_latest_message(inp: ScriptedInput) -> str | None:
    messages = inp.body.get("messages") or []
    content = messages[-1].get("content") if messages else None
    for block in content if isinstance(content, list) else []:
        text = block.get("text", "") if isinstance(block, dict) else ""
        if text.startswith(prompts.BLOCK_START):
            return text
    return None


@scripted_rule(help_line="scratchpad: I tell you what my scratchpad block holds")
def scratchpad_show(inp: ScriptedInput) -> ScriptedReply | None:
    if inp.user_text is None or inp.user_text.strip().lower() != "scratchpad":
        return None
    if prompts.TOOL_NAME not in inp.tool_names:
        return ScriptedReply(text=SCRATCHPAD_OFF)
    block = _block_in_latest_message(inp)
    if block is None:
        return ScriptedReply(text="My scratchpad is empty.")
    return ScriptedReply(text="My scratchpad holds:\n" + block)
