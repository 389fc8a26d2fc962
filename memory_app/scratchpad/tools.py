"""The `session_scratchpad` tool (seed 003; seed 001's `session.scratchpad`, renamed because the
API allows no dot in a tool name). Offered only while `scratchpad.enabled` is on."""

from __future__ import annotations

from typing import Any

from memory_app.scratchpad import prompts
from memory_app.scratchpad.context import scratchpad_enabled
from memory_app.scratchpad.services import (
    ACTIONS,
    ScratchpadActionError,
    ScratchpadLimits,
    scratchpad_apply,
)
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.common.db import db
from sessions_app.engine.contract import TextLimit, ToolContext, ToolError, ToolSpec

# Seed 003 gives the parameters as a table and seed 001 the description; this is their schema.
# `action` is the only required field: which of the others an action needs is checked by the
# service, so a wrong call gets an error that says what to send.
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS), "description": prompts.ACTION_DESCRIPTION},
        "content": {"type": "string", "description": prompts.CONTENT_DESCRIPTION},
        "ref": {"type": "string", "description": prompts.REF_DESCRIPTION},
        "items": {"type": "array", "items": {"type": "string"}, "description": prompts.ITEMS_DESCRIPTION},
    },
    "required": ["action"],
}
# What a call's input is checked against: the schema above, but for `items`' item type. Seed 003's
# refs.set drops non-string items silently rather than refuse the call.
CHECKED_SCHEMA: dict[str, Any] = {
    **INPUT_SCHEMA,
    "properties": {**INPUT_SCHEMA["properties"], "items": {"type": "array"}},
}


# Seed 003 truncates a space's text to its setting (notes_max_chars, plan_max_chars) and drops a
# refs.set item longer than a ref may be; past the settings' own ceiling a text is refused.
SCRATCHPAD_TEXT_MAX_CHARS = 1_000_000
SCRATCHPAD_TEXT_LIMIT = TextLimit(
    chars=SCRATCHPAD_TEXT_MAX_CHARS,
    name="the ceiling of notes_max_chars and plan_max_chars, SCRATCHPAD_TEXT_MAX_CHARS",
)


async def session_scratchpad(ctx: ToolContext, tool_input: dict) -> str:
    try:
        change = await db(scratchpad_apply)(
            session_id=ctx.session.id,
            action=tool_input.get("action"),
            args=tool_input,
            author=AGENT_AUTHOR,
            limits=ScratchpadLimits.from_settings(ctx.session.settings),
        )
    except ScratchpadActionError as exc:
        raise ToolError(str(exc)) from exc
    return change.message


SPEC = ToolSpec(
    name=prompts.TOOL_NAME,
    description=prompts.TOOL_DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    checked_schema=CHECKED_SCHEMA,
    handler=session_scratchpad,
    enabled=scratchpad_enabled,
    text_limits={
        "content": SCRATCHPAD_TEXT_LIMIT,
        # Seed 003 trims a ref, then refuses one over REF_MAX_CHARS with its own message.
        "ref": SCRATCHPAD_TEXT_LIMIT,
        "items": SCRATCHPAD_TEXT_LIMIT,
    },
)
