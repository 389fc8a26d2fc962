"""The session notepad's tools (seed 000): `read_notepad`, `write_notepad`, `update_notepad`.

Schemas are the seed's `parameters`, unchanged; returns are the seed's (`{content}`, `{ok: true}`).
Every misuse is a `ToolError` the model can act on, and leaves the notepad unchanged. The fields'
types, that "content" and "operation" are given and that "operation" is one of the operations are
checked against the schemas before a handler runs (`common.tool_input`; a null counts as not
given); which fields an operation needs, and that they are not empty, are the service's rules.
"""

from __future__ import annotations

from typing import Any

from memory_app.notepad import selectors, services
from memory_app.notepad.context import notepad_enabled
from memory_app.notepad.prompts import (
    READ_NOTEPAD_DESCRIPTION,
    UPDATE_NOTEPAD_DESCRIPTION,
    WRITE_NOTEPAD_DESCRIPTION,
)
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.common.db import db
from sessions_app.common.text_edits import TEXT_EDIT_SCHEMA
from sessions_app.engine.contract import TextLimit, ToolContext, ToolError, ToolSpec

READ_NOTEPAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
}

WRITE_NOTEPAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": "The new notepad content (replaces everything)"}
    },
    "required": ["content"],
}

# Seed 000's schema, shared with `edit_system_prompt` (the same operations): one definition.
UPDATE_NOTEPAD_SCHEMA: dict[str, Any] = TEXT_EDIT_SCHEMA

OK: dict[str, Any] = {"ok": True}

# No text of an edit can be longer than the notepad may be.
NOTEPAD_TEXT_LIMIT = TextLimit(
    chars=services.NOTEPAD_MAX_CHARS, name="the notepad's size limit, NOTEPAD_MAX_CHARS"
)


async def read_notepad(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    state = await db(selectors.notepad_get)(session_id=ctx.session.id)
    return {"content": state.content}


async def write_notepad(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    try:
        await db(services.notepad_write)(
            session_id=ctx.session.id, content=tool_input["content"], author=AGENT_AUTHOR
        )
    except services.NotepadEditError as exc:
        raise ToolError(str(exc)) from exc
    return OK


async def update_notepad(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    try:
        await db(services.notepad_update)(
            session_id=ctx.session.id,
            operation=tool_input["operation"],
            content=tool_input.get("content"),
            find=tool_input.get("find"),
            replace=tool_input.get("replace"),
            replace_all=bool(tool_input.get("replace_all")),
            author=AGENT_AUTHOR,
        )
    except services.NotepadEditError as exc:
        raise ToolError(str(exc)) from exc
    return OK


READ_NOTEPAD = ToolSpec(
    name="read_notepad",
    description=READ_NOTEPAD_DESCRIPTION,
    input_schema=READ_NOTEPAD_SCHEMA,
    handler=read_notepad,
    enabled=notepad_enabled,
)


WRITE_NOTEPAD = ToolSpec(
    name="write_notepad",
    description=WRITE_NOTEPAD_DESCRIPTION,
    input_schema=WRITE_NOTEPAD_SCHEMA,
    handler=write_notepad,
    enabled=notepad_enabled,
    text_limits={"content": NOTEPAD_TEXT_LIMIT},
)


UPDATE_NOTEPAD = ToolSpec(
    name="update_notepad",
    description=UPDATE_NOTEPAD_DESCRIPTION,
    input_schema=UPDATE_NOTEPAD_SCHEMA,
    handler=update_notepad,
    enabled=notepad_enabled,
    text_limits={"content": NOTEPAD_TEXT_LIMIT, "find": NOTEPAD_TEXT_LIMIT, "replace": NOTEPAD_TEXT_LIMIT},
)
