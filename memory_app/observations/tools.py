"""`scratchpad_read` (seed 004): read an offloaded observation back, whole or in slices.

Offered to the model only while the current scope (the turn, or the session with
`offload.scope = session`) holds a live observation, as the seed's planner does.
"""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.observations.content import SCRATCHPAD_READ
from memory_app.observations.grep import observation_grep
from memory_app.observations.prompts import SCRATCHPAD_READ_DESCRIPTION, SCRATCHPAD_READ_SCHEMA
from memory_app.observations.selectors import (
    ObservationReadError,
    observation_get_for_read,
    observation_read,
    observation_read_lines,
    observations_in_scope_exist,
)
from sessions_app.common.db import db_heavy
from sessions_app.engine.contract import SessionSnapshot, ToolContext, ToolError, ToolSpec


def _scope(session: SessionSnapshot) -> str:
    return str(session.setting("offload", "scope"))


def scratchpad_read_offered(session: SessionSnapshot, turn_id: uuid.UUID) -> bool:
    return observations_in_scope_exist(session_id=session.id, turn_id=turn_id, scope=_scope(session))


def _read(ctx: ToolContext, tool_input: dict[str, Any]) -> dict[str, Any]:
    # "scratchpad_id" is required, "mode" one of the modes and the numbers integers: checked against
    # the schema before the handler runs. What a mode needs, and the bounds that depend on the
    # observation, are checked where they are read (the dashboard reads through them too).
    mode = tool_input.get("mode") or "head"
    observation = observation_get_for_read(
        session_id=ctx.session.id,
        turn_id=ctx.turn_id,
        scope=_scope(ctx.session),
        observation_id=tool_input.get("scratchpad_id"),
    )
    if mode == "lines":
        if tool_input.get("start_line") is None:
            raise ObservationReadError("mode lines needs start_line.")
        return observation_read_lines(
            observation=observation, start_line=tool_input["start_line"], end_line=tool_input.get("end_line")
        )
    if mode == "grep":
        return observation_grep(
            observation=observation,
            pattern=tool_input.get("pattern"),
            context=tool_input.get("context"),
            max_matches=tool_input.get("max_matches"),
        )
    return observation_read(observation=observation, mode=mode, arguments=tool_input)


async def scratchpad_read(ctx: ToolContext, tool_input: dict[str, Any]) -> dict[str, Any]:
    try:
        return await db_heavy(_read)(ctx, tool_input)
    except ObservationReadError as exc:
        raise ToolError(str(exc)) from None


SCRATCHPAD_READ_TOOL = ToolSpec(
    name=SCRATCHPAD_READ,
    description=SCRATCHPAD_READ_DESCRIPTION,
    input_schema=SCRATCHPAD_READ_SCHEMA,
    handler=scratchpad_read,
    offered_in_turn=scratchpad_read_offered,
)
