"""Every read of offloaded observations: access checks, the dashboard's lists, slices, lines.

A slice reads only the chunks that hold it (chunk = offset // chunk_size), so its cost does not
grow with the observation; `lines` finds its first chunk through the (observation, end_line)
index and stops reading once it has its lines. `grep` (in `grep.py`) streams the chunks the same
way (`chunks_from`); `{{stepN.field}}` references resolve in `references.py`.

Errors are `ObservationReadError` with a message for the model (the tool turns it into a tool
error).
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from memory_app.observations import prompts
from memory_app.observations.content import iter_lines
from memory_app.observations.models import Observation, ObservationChunk
from sessions_app.fastpath.rows import exists_where_any, values_where

SCOPE_TURN = "turn"
SCOPE_SESSION = "session"
OBSERVATION_ID_RE = re.compile(r"^[0-9a-f]{16}$")
CHUNK_READ_BATCH = 8  # chunks fetched per query when streaming (lines, grep)
# Limits of one scratchpad_read call, so that a read never floods the context.
READ_MAX_CHARS = 50_000  # text: characters returned by one read (full, head, tail, range, lines, grep)
READ_MAX_BYTES = 32_768  # binary: bytes returned by one read (about 44,000 base64 characters)
DEFAULT_READ_N = 2000  # seed 004: head/tail default
DEFAULT_LINES = 100  # lines mode without end_line


class ObservationReadError(Exception):
    """A read the model must correct; the message says how."""


# ---------------------------------------------------------------------------
# Scope and access
# ---------------------------------------------------------------------------
def observations_in_scope(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, scope: str, now: datetime | None = None
):
    """The live observations the model may read: its session's, and with scope `turn` only the
    current turn's (seed 004's isolation)."""
    qs = Observation.objects.filter(session_id=session_id, expires_at__gt=now or timezone.now())
    # A result masked by compaction is readable from any turn (its placeholder may be in any).
    return qs.filter(Q(turn_id=turn_id) | Q(session_scope=True)) if scope == SCOPE_TURN else qs


LIVE_OF_SESSION = (("session_id", "="), ("expires_at", ">"))


def observations_in_scope_exist(*, session_id: uuid.UUID, turn_id: uuid.UUID, scope: str) -> bool:
    """Whether `observations_in_scope` has any. Every step asks it (the read tool is offered
    only then): SQL built once, the `OR` of scope `turn` as two lookups in one statement
    (`exists_where_any`)."""
    now = timezone.now()
    if scope != SCOPE_TURN:
        return bool(values_where(Observation, ("id",), LIVE_OF_SESSION, (session_id, now), limit=1))
    return exists_where_any(
        Observation,
        [
            ((*LIVE_OF_SESSION, ("turn_id", "=")), (session_id, now, turn_id)),
            ((*LIVE_OF_SESSION, ("session_scope", "=")), (session_id, now, True)),
        ],
    )


def observation_get_for_read(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, scope: str, observation_id: Any, now: datetime | None = None
) -> Observation:
    """The observation if this session may read it now; else `ObservationReadError`.

    Another session's observation is reported exactly as an unknown id: nothing is revealed.
    """
    unknown = ObservationReadError(prompts.READ_UNKNOWN_ID.format(observation_id=observation_id))
    if not isinstance(observation_id, str) or not OBSERVATION_ID_RE.match(observation_id):
        raise unknown
    observation = Observation.objects.filter(pk=observation_id, session_id=session_id).first()
    if observation is None:
        raise unknown
    # Expiry first: once expired, no turn can read it, whichever turn made it.
    if observation.expires_at <= (now or timezone.now()):
        raise ObservationReadError(
            prompts.READ_EXPIRED.format(
                observation_id=observation_id,
                tool_name=observation.tool_name,
                size_bytes=observation.size_bytes,
                expires_at=observation.expires_at.isoformat(timespec="seconds"),
            )
        )
    if scope == SCOPE_TURN and observation.turn_id != turn_id and not observation.session_scope:
        raise ObservationReadError(
            prompts.READ_EARLIER_TURN.format(observation_id=observation_id, tool_name=observation.tool_name)
        )
    return observation


# ---------------------------------------------------------------------------
# The dashboard's lists (operators may see every observation of a session)
# ---------------------------------------------------------------------------
def observations_latest(*, session_id: uuid.UUID, limit: int) -> list[Observation]:
    """The session's `limit` latest observations, newest first (without summary and metadata)."""
    return list(
        Observation.objects.filter(session_id=session_id)
        .defer("summary", "metadata")
        .order_by("-created_at")[:limit]
    )


def observation_get_for_session(*, session_id: uuid.UUID, observation_id: Any) -> Observation | None:
    """The observation `observation_id` of this session, live or expired (an expired one's
    content is dropped by `observations_gc`); None for another session's or an unknown id."""
    if not isinstance(observation_id, str):
        return None
    return Observation.objects.filter(pk=observation_id, session_id=session_id).first()


# ---------------------------------------------------------------------------
# Character / byte slices
# ---------------------------------------------------------------------------
def observation_slice(*, observation: Observation, start: int, end: int) -> str | bytes:
    """Characters (text) or bytes (binary) `start` to `end` (exclusive), reading only the chunks
    that hold them. Bounds are clamped to the content."""
    total = observation.char_count
    start, end = max(0, min(start, total)), max(0, min(end, total))
    if end <= start:
        return b"" if observation.is_binary else ""
    size = observation.chunk_size
    first, last = start // size, (end - 1) // size
    rows = ObservationChunk.objects.filter(
        observation=observation, index__gte=first, index__lte=last
    ).order_by("index")
    offset = first * size
    if observation.is_binary:
        data = b"".join(bytes(d or b"") for d in rows.values_list("data", flat=True))
        return data[start - offset : end - offset]
    text = "".join(rows.values_list("text", flat=True))
    return text[start - offset : end - offset]


def chunks_from(observation: Observation, first_index: int) -> Iterator[str]:
    """The text chunks from `first_index` on, fetched 1, 2, 4, ... up to CHUNK_READ_BATCH at a
    time: a short read (a few lines) costs one chunk, a long one (grep) few queries."""
    index, size = first_index, 1
    while True:
        batch = list(
            ObservationChunk.objects.filter(observation=observation, index__gte=index, index__lt=index + size)
            .order_by("index")
            .values_list("text", flat=True)
        )
        yield from batch
        if len(batch) < size:
            return
        index += size
        size = min(size * 2, CHUNK_READ_BATCH)


def _slice_result(observation: Observation, mode: str, start: int, end: int) -> dict[str, Any]:
    content = observation_slice(observation=observation, start=start, end=end)
    end = min(end, observation.char_count)
    result: dict[str, Any] = {"scratchpad_id": observation.id, "mode": mode, "kind": observation.kind}
    if isinstance(content, bytes):
        result.update(
            start=start,
            end=end,
            size_bytes=observation.size_bytes,
            encoding="base64",
            content=base64.b64encode(content).decode("ascii"),
        )
    else:
        result.update(start=start, end=end, total_chars=observation.char_count, content=content)
    return result


def _unit(observation: Observation) -> str:
    return "bytes" if observation.is_binary else "characters"


def _read_limit(observation: Observation) -> int:
    return READ_MAX_BYTES if observation.is_binary else READ_MAX_CHARS


def int_arg(value: Any, name: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ObservationReadError(f"{name} must be an integer.")
    return value


def observation_read(*, observation: Observation, mode: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One read in mode `full`, `head`, `tail` or `range` (seed 004)."""
    total, limit, unit = observation.char_count, _read_limit(observation), _unit(observation)
    if mode == "full":
        if total > limit:
            raise ObservationReadError(
                f"The observation is {total} {unit}; a full read is limited to {limit}. Read it in "
                "parts with head, tail, range, lines or grep."
            )
        return _slice_result(observation, mode, 0, total)
    if mode in ("head", "tail"):
        n = int_arg(arguments.get("n"), "n", DEFAULT_READ_N)
        if not 1 <= n <= limit:
            raise ObservationReadError(f"n must be from 1 to {limit} ({unit}).")
        start = 0 if mode == "head" else max(0, total - n)
        return _slice_result(observation, mode, start, start + n)
    # range
    if arguments.get("start") is None or arguments.get("end") is None:
        raise ObservationReadError("mode range needs start and end.")
    start, end = int_arg(arguments["start"], "start"), int_arg(arguments["end"], "end")
    if start < 0 or end <= start:
        raise ObservationReadError("range needs 0 <= start < end.")
    if start >= total:
        raise ObservationReadError(f"start {start} is past the end: the observation has {total} {unit}.")
    if end - start > limit:
        raise ObservationReadError(f"A range is limited to {limit} {unit}; this one asks for {end - start}.")
    return _slice_result(observation, mode, start, end)


# ---------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------
def text_only(observation: Observation, mode: str) -> None:
    if observation.is_binary:
        raise ObservationReadError(
            f"The observation {observation.id} is binary: mode {mode} reads text. Use head, tail or "
            "range, which return base64."
        )


def observation_read_lines(
    *, observation: Observation, start_line: int, end_line: int | None
) -> dict[str, Any]:
    """Lines `start_line` to `end_line` (1-based, inclusive), at most READ_MAX_CHARS of them."""
    text_only(observation, "lines")
    start_line = int_arg(start_line, "start_line")
    last = start_line + DEFAULT_LINES - 1 if end_line is None else int_arg(end_line, "end_line")
    total = observation.line_count
    if start_line < 1 or last < start_line:
        raise ObservationReadError("lines needs 1 <= start_line <= end_line.")
    if start_line > total:
        raise ObservationReadError(
            f"start_line {start_line} is past the end: the observation has {total} lines."
        )
    last = min(last, total)
    first_index = (
        ObservationChunk.objects.filter(observation=observation, end_line__gte=start_line)
        .order_by("end_line", "index")
        .values_list("index", "start_line")
        .first()
    )
    assert first_index is not None  # start_line <= line_count: some chunk holds it
    index, chunk_line = first_index
    parts: list[str] = []
    used, returned, truncated = 0, start_line - 1, False
    for number, text, cut in iter_lines(
        chunks_from(observation, index), first_line=chunk_line, keep=READ_MAX_CHARS + 1
    ):
        if number < start_line:
            continue
        if number > last:
            break
        # Every line keeps its newline; only the last may have none.
        line = text + ("\n" if number < total or _ends_with_newline(observation) else "")
        if cut or used + len(line) > READ_MAX_CHARS:
            truncated = True
            break
        parts.append(line)
        used += len(line)
        returned = number
    result: dict[str, Any] = {
        "scratchpad_id": observation.id,
        "mode": "lines",
        "kind": observation.kind,
        "start_line": start_line,
        "end_line": returned,
        "total_lines": total,
        "content": "".join(parts),
    }
    if truncated:
        result["truncated"] = (
            f"stopped before line {returned + 1}: a read returns at most {READ_MAX_CHARS} characters "
            "(use range for a longer line)"
        )
    return result


def _ends_with_newline(observation: Observation) -> bool:
    return (
        observation.char_count > 0
        and observation_slice(
            observation=observation, start=observation.char_count - 1, end=observation.char_count
        )
        == "\n"
    )
