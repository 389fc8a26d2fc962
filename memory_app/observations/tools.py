"""`scratchpad_read` (seed 004): read an offloaded observation back, whole or in slices.

Offered to the model only while the current scope (the turn, or the session with
`offload.scope = session`) holds a live observation, as the seed's planner does.
"""

from __future__ import annotations

from typing import Any

from memory_app.observations.content import SCRATCHPAD_READ
from memory_app.observations.grep import GREP_PATTERN_MAX_CHARS, observation_grep
from memory_app.observations.prompts import SCRATCHPAD_READ_DESCRIPTION, SCRATCHPAD_READ_SCHEMA
from memory_app.observations.selectors import (
    ObservationReadError,
    observation_get_for_read,
    observation_read,
    observation_read_lines,
)
from sessions_app.common.db import db_heavy
from sessions_app.common.estimate import estimate_json_tokens, estimate_text_tokens
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec

# An id is 16 characters; a longer text is no id (a mistyped one still gets "not found").
SCRATCHPAD_ID_MAX_CHARS = 200


def _scope(session: SessionSnapshot) -> str:
    return str(session.setting("offload", "scope"))


def offload_enabled(session: SessionSnapshot) -> bool:
    return bool(session.setting("offload", "enabled"))


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


# What the note saying how to read on adds to a clipped read, in tokens.
READ_ON_NOTE_TOKENS = 60


def _chars_that_fit(content: str, room: int) -> int:
    """How many characters of `content` (from its start) take at most `room` tokens."""
    keep = len(content)
    while keep > 0:
        tokens = estimate_text_tokens(content[:keep])
        if tokens <= room:
            return keep
        keep = min(keep - 1, int(keep * room / tokens * 0.95))
    return 0


def read_fit(result: dict[str, Any], room_tokens: int | None) -> dict[str, Any]:
    """`result` cut to what the next request has room for (`ToolContext.room_tokens`), with
    `truncated` saying how to read on: a read keeps its start (`tail` its end, `grep` its first
    lines), and ends on a line's end in modes `lines` and `grep`."""
    if room_tokens is None or estimate_json_tokens(result) <= room_tokens:
        return result
    content = result["content"]
    room = room_tokens - estimate_json_tokens({**result, "content": ""}) - READ_ON_NOTE_TOKENS
    keep = _chars_that_fit(content, max(room, 0))
    mode = result["mode"]
    fitted = dict(result)
    if result.get("encoding") == "base64":
        keep -= keep % 4  # whole groups: 3 bytes each
        fitted["content"] = content[:keep]
        fitted["end"] = result["start"] + keep // 4 * 3
        how = f"read on with mode range, start {fitted['end']}"
    elif mode == "tail":
        fitted["content"] = content[len(content) - keep :]
        fitted["start"] = result["end"] - keep
        how = f"read what comes before with mode range, end {fitted['start']}"
    elif mode in ("lines", "grep"):
        cut = content[:keep]
        # Whole lines only; a first line longer than the room is cut in it.
        cut = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
        fitted["content"] = cut
        if mode == "lines":
            fitted["end_line"] = result["start_line"] + max(cut.count("\n") - 1, 0)
            how = f"read on with mode lines, start_line {fitted['end_line'] + 1}"
        else:
            how = "narrow the pattern or lower max_matches, or read on after the last line shown with lines"
    else:  # head, range, full
        fitted["content"] = content[:keep]
        fitted["end"] = result["start"] + keep
        how = f"read on with mode range, start {fitted['end']}"
    fitted["truncated"] = (
        f"cut to fit the room left in the context (about {room_tokens} tokens for this result): {how}"
    )
    return fitted


async def scratchpad_read(ctx: ToolContext, tool_input: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await db_heavy(_read)(ctx, tool_input)
    except ObservationReadError as exc:
        raise ToolError(str(exc)) from None
    return read_fit(result, ctx.room_tokens)


SCRATCHPAD_READ_TOOL = ToolSpec(
    name=SCRATCHPAD_READ,
    description=SCRATCHPAD_READ_DESCRIPTION,
    input_schema=SCRATCHPAD_READ_SCHEMA,
    handler=scratchpad_read,
    enabled=offload_enabled,
    # Offered from the start, not once an observation exists: the tool list is the first part of
    # the cached prefix, and a tool appearing mid-session rewrites all of it. Seed 004's turn
    # isolation is the tool refusing another turn's id (`observation_get_for_read`).
    text_limits={
        "scratchpad_id": TextLimit(chars=SCRATCHPAD_ID_MAX_CHARS, name="SCRATCHPAD_ID_MAX_CHARS"),
        "pattern": TextLimit(chars=GREP_PATTERN_MAX_CHARS, name="GREP_PATTERN_MAX_CHARS"),
    },
)
