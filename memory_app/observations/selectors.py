"""Every read of offloaded observations: access checks, slices, lines, grep, references.

A slice reads only the chunks that hold it (chunk = offset // chunk_size), so its cost does not
grow with the observation; `lines` finds its first chunk through the (observation, end_line)
index and stops reading once it has its lines; `grep` streams the chunks in small batches and
keeps at most one (capped) line plus the context lines in memory.

Errors are `ObservationReadError` with a message for the model (the tool turns it into a tool
error).
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import regex
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from memory_app.observations.content import (
    FieldMissing,
    ResultParts,
    is_synthetic_observation,
    iter_lines,
    parts_field,
    references_in,
    references_substitute,
    result_json_size,
    result_parts,
)
from memory_app.observations.models import Observation, ObservationChunk, ObservationKind
from sessions_app.models import ToolCall

SCOPE_TURN = "turn"
SCOPE_SESSION = "session"
OBSERVATION_ID_RE = re.compile(r"^[0-9a-f]{16}$")
CHUNK_READ_BATCH = 8  # chunks fetched per query when streaming (lines, grep)
# Limits of one scratchpad_read call, so that a read never floods the context.
READ_MAX_CHARS = 50_000  # text: characters returned by one read (full, head, tail, range, lines, grep)
READ_MAX_BYTES = 32_768  # binary: bytes returned by one read (about 44,000 base64 characters)
DEFAULT_READ_N = 2000  # seed 004: head/tail default
DEFAULT_LINES = 100  # lines mode without end_line
# grep: the pattern is a regular expression of the `regex` module (the syntax of `re`). Its cost is
# bounded three ways: the pattern's length, the characters of a line searched (a longer line is
# searched and shown up to this length), and time (regex's own timeout, checked inside the match).
GREP_PATTERN_MAX_CHARS = 500
GREP_LINE_MAX_CHARS = 2000
GREP_LINE_TIME_LIMIT_SECONDS = 1.0  # one line taking this long means catastrophic backtracking
GREP_TIME_LIMIT_SECONDS = 10.0  # a whole grep stops here and returns what it found
GREP_MAX_CONTEXT = 20
GREP_DEFAULT_MAX_MATCHES = 50
GREP_MAX_MATCHES = 500


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


def observations_in_scope_exist(*, session_id: uuid.UUID, turn_id: uuid.UUID, scope: str) -> bool:
    return observations_in_scope(session_id=session_id, turn_id=turn_id, scope=scope).exists()


def observation_get_for_read(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, scope: str, observation_id: Any, now: datetime | None = None
) -> Observation:
    """The observation if this session may read it now; else `ObservationReadError`.

    Another session's observation is reported exactly as an unknown id: nothing is revealed.
    """
    unknown = ObservationReadError(
        f"No observation with scratchpad_id {observation_id!r} in this session. Use the "
        "scratchpad_id of a synthetic observation you were given."
    )
    if not isinstance(observation_id, str) or not OBSERVATION_ID_RE.match(observation_id):
        raise unknown
    observation = Observation.objects.filter(pk=observation_id, session_id=session_id).first()
    if observation is None:
        raise unknown
    if scope == SCOPE_TURN and observation.turn_id != turn_id and not observation.session_scope:
        raise ObservationReadError(
            f"The observation {observation_id} belongs to an earlier turn: observations can be read "
            "only in the turn that produced them. Call the tool that produced it again."
        )
    if observation.expires_at <= (now or timezone.now()):
        raise ObservationReadError(
            f"The observation {observation_id} expired at {observation.expires_at.isoformat()} and is "
            "no longer available. Call the tool that produced it again."
        )
    return observation


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


def _chunks_from(observation: Observation, first_index: int) -> Iterator[str]:
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


def _int_arg(value: Any, name: str, default: int | None = None) -> int:
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
        n = _int_arg(arguments.get("n"), "n", DEFAULT_READ_N)
        if not 1 <= n <= limit:
            raise ObservationReadError(f"n must be from 1 to {limit} ({unit}).")
        start = 0 if mode == "head" else max(0, total - n)
        return _slice_result(observation, mode, start, start + n)
    # range
    if arguments.get("start") is None or arguments.get("end") is None:
        raise ObservationReadError("mode range needs start and end.")
    start, end = _int_arg(arguments["start"], "start"), _int_arg(arguments["end"], "end")
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
def _text_only(observation: Observation, mode: str) -> None:
    if observation.is_binary:
        raise ObservationReadError(
            f"The observation {observation.id} is binary: mode {mode} reads text. Use head, tail or "
            "range, which return base64."
        )


def observation_read_lines(
    *, observation: Observation, start_line: int, end_line: int | None
) -> dict[str, Any]:
    """Lines `start_line` to `end_line` (1-based, inclusive), at most READ_MAX_CHARS of them."""
    _text_only(observation, "lines")
    start_line = _int_arg(start_line, "start_line")
    last = start_line + DEFAULT_LINES - 1 if end_line is None else _int_arg(end_line, "end_line")
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
        _chunks_from(observation, index), first_line=chunk_line, keep=READ_MAX_CHARS + 1
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


# ---------------------------------------------------------------------------
# Grep
# ---------------------------------------------------------------------------
def grep_pattern_compile(pattern: Any) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise ObservationReadError("mode grep needs pattern, a regular expression.")
    if len(pattern) > GREP_PATTERN_MAX_CHARS:
        raise ObservationReadError(f"pattern is limited to {GREP_PATTERN_MAX_CHARS} characters.")
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ObservationReadError(f"pattern is not a valid regular expression: {exc}.") from None


@dataclass
class _GrepOutput:
    lines: list[str]
    separate_groups: bool  # as grep: `--` between groups only when context lines are shown
    chars: int = 0
    last_shown: int = 0

    def add(self, number: int, text: str, cut: bool, marker: str) -> bool:
        """Append a line (grep -n -C style); False when the output limit is reached."""
        line = f"{number}{marker}{text}{'…' if cut else ''}"
        separator = self.separate_groups and self.last_shown and number > self.last_shown + 1
        cost = len(line) + 1 + (3 if separator else 0)
        if self.chars + cost > READ_MAX_CHARS:
            return False
        if separator:
            self.lines.append("--")
        self.lines.append(line)
        self.chars += cost
        self.last_shown = number
        return True


def observation_grep(
    *, observation: Observation, pattern: Any, context: Any = None, max_matches: Any = None
) -> dict[str, Any]:
    """The lines matching `pattern`, numbered (`N:line`), with `context` lines (`N-line`) around
    each and `--` between separate groups, as grep -n -C prints them."""
    _text_only(observation, "grep")
    compiled = grep_pattern_compile(pattern)
    context = _int_arg(context, "context", 0)
    max_matches = _int_arg(max_matches, "max_matches", GREP_DEFAULT_MAX_MATCHES)
    if not 0 <= context <= GREP_MAX_CONTEXT:
        raise ObservationReadError(f"context must be from 0 to {GREP_MAX_CONTEXT}.")
    if not 1 <= max_matches <= GREP_MAX_MATCHES:
        raise ObservationReadError(f"max_matches must be from 1 to {GREP_MAX_MATCHES}.")
    output = _GrepOutput([], separate_groups=context > 0)
    before: deque[tuple[int, str, bool]] = deque(maxlen=context)
    matches, after, stopped = 0, 0, None
    deadline = time.monotonic() + GREP_TIME_LIMIT_SECONDS
    lines = iter_lines(_chunks_from(observation, 0), first_line=1, keep=GREP_LINE_MAX_CHARS)
    for number, text, cut in lines:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped = f"time limit of {GREP_TIME_LIMIT_SECONDS:g} s reached at line {number}"
            break
        if matches >= max_matches and not after:
            stopped = (
                f"max_matches ({max_matches}) reached before line {number}: raise max_matches, narrow "
                f"the pattern, or read on with lines from line {number}"
            )
            break
        timeout = min(GREP_LINE_TIME_LIMIT_SECONDS, remaining)
        try:
            found = compiled.search(text, timeout=timeout) is not None and matches < max_matches
        except TimeoutError:
            if timeout < GREP_LINE_TIME_LIMIT_SECONDS:
                stopped = f"time limit of {GREP_TIME_LIMIT_SECONDS:g} s reached at line {number}"
                break
            raise ObservationReadError(
                f"The pattern took over {GREP_LINE_TIME_LIMIT_SECONDS:g} s on line {number} (catastrophic "
                "backtracking): simplify it, e.g. avoid nested quantifiers such as (a+)+."
            ) from None
        if found:
            matches += 1
            ok = all(output.add(n, t, c, "-") for n, t, c in before) and output.add(number, text, cut, ":")
            before.clear()
            after = context
        elif after:
            ok = output.add(number, text, cut, "-")
            after -= 1
        else:
            before.append((number, text, cut))
            continue
        if not ok:
            stopped = f"output limit of {READ_MAX_CHARS} characters reached at line {number}"
            break
    result: dict[str, Any] = {
        "scratchpad_id": observation.id,
        "mode": "grep",
        "pattern": pattern,
        "matches": matches,
        "content": "\n".join(output.lines),
    }
    if stopped:
        result["stopped"] = stopped
    return result


# ---------------------------------------------------------------------------
# {{stepN.field}} references
# ---------------------------------------------------------------------------
class ReferenceUnresolved(Exception):
    """A reference that cannot be resolved; the message is for the model."""


def observation_parts(*, observation: Observation) -> ResultParts:
    """The whole stored result (all chunks: only for references, which need the whole value)."""
    rows = ObservationChunk.objects.filter(observation=observation).order_by("index")
    if observation.is_binary:
        data = b"".join(bytes(d or b"") for d in rows.values_list("data", flat=True))
        return ResultParts(ObservationKind.BINARY, data=data, metadata=observation.metadata)
    return ResultParts(
        ObservationKind.TEXT,
        text="".join(rows.values_list("text", flat=True)),
        metadata=observation.metadata,
        content_is_json=observation.content_is_json,
    )


def _step_result(*, session_id: uuid.UUID, turn_id: uuid.UUID, step: int, max_bytes: int) -> ResultParts:
    calls = ToolCall.objects.filter(session_id=session_id, turn_id=turn_id).order_by("pk")
    count = calls.count()
    if not 1 <= step <= count:
        raise ReferenceUnresolved(
            f"{{{{step{step}...}}}}: there is no step {step} with a result in this turn. Steps number "
            f"this turn's tool calls from 1 in the order you made them; {count} have results so far."
        )
    call = calls[step - 1]
    if call.is_error:
        raise ReferenceUnresolved(f"Step {step} ({call.name}) failed: its result cannot be referenced.")
    observation = Observation.objects.filter(session_id=session_id, turn_id=turn_id, step=step).first()
    if observation is None and is_synthetic_observation(call.result):
        raise ReferenceUnresolved(f"The observation of step {step} ({call.name}) is no longer stored.")
    if observation is None:
        return result_parts(call.result)
    if observation.expires_at <= timezone.now():
        raise ReferenceUnresolved(
            f"The observation of step {step} ({call.name}) expired: call {call.name} again."
        )
    if observation.size_bytes > max_bytes:
        raise ReferenceUnresolved(
            f"Step {step}'s result is {observation.size_bytes} bytes; a tool input is limited to {max_bytes}."
        )
    return observation_parts(observation=observation)


def tool_input_resolve(*, session_id: uuid.UUID, turn_id: uuid.UUID, tool_input: dict) -> dict:
    """`tool_input` with every `{{stepN.field}}` replaced by that field of step N's full result.

    Step N is the N-th tool call of the current turn (1-based, in the order the model made them,
    across the turn's model steps); `field` is `content` or a metadata field of that result (a
    key of the result itself when it is a JSON object without a string `content`). The value
    comes from the stored full result, never from the summary the model saw. Raises
    `ReferenceUnresolved` for an unknown step or field, a failed step, an expired observation, or
    an input that would exceed PALIMPSEST_MAX_FRAME_BYTES (a client must receive it in one frame).
    """
    references = references_in(tool_input)
    if not references:
        return tool_input
    max_bytes = settings.PALIMPSEST_MAX_FRAME_BYTES
    results: dict[int, ResultParts] = {}
    values: dict[tuple[int, str], Any] = {}
    for step, name in references:
        if step not in results:
            results[step] = _step_result(
                session_id=session_id, turn_id=turn_id, step=step, max_bytes=max_bytes
            )
        try:
            values[(step, name)] = parts_field(results[step], name)
        except FieldMissing as exc:
            raise ReferenceUnresolved(
                f"{{{{step{step}.{name}}}}}: step {step}'s result has no field {name!r}; its fields: "
                f"{', '.join(exc.available)}."
            ) from None
    resolved = references_substitute(tool_input, lambda step, name: values[(step, name)])
    if result_json_size(resolved) > max_bytes:
        raise ReferenceUnresolved(f"With its references resolved this tool input exceeds {max_bytes} bytes.")
    return resolved
