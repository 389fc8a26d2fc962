"""Every write of offloaded observations: store one, offload a step's large results, collect
the content of expired ones.

The offload rule (seed 004), applied by `tool_outcomes_offload` to every tool result, server
or client: when `len(json.dumps(result))` exceeds the session's `offload.threshold_bytes`, the
result is stored whole as an `Observation` and the model is given the synthetic observation
instead. Exceptions: `scratchpad_read`'s own results (already bounded slices; offloading them
would only make a new observation of a slice), those of any reading tool that fits its result to
the room itself (`ToolSpec.fits_room`: `recall`), and results without content (a tool error
raised by a server tool, a cancelled call).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from memory_app.observations.content import (
    SCRATCHPAD_READ,
    ResultParts,
    is_synthetic_observation,
    line_count,
    result_json_size,
    result_parts,
    summary_binary,
    summary_text,
    synthetic_observation,
    text_chunks,
)
from memory_app.observations.models import Observation, ObservationChunk, ObservationKind
from sessions_app import services as core_services
from sessions_app.common.types import ToolOutcome
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.models import ToolCall

CHUNK_CHARS = 65_536  # characters per chunk of a text observation
CHUNK_BYTES = 65_536  # bytes per chunk of a binary observation
CHUNK_WRITE_BATCH = 32  # chunks per INSERT: memory stays ~2 MB whatever the observation's size
OBSERVATION_ID_DIGITS = 16  # 16 hexadecimal characters, all of them decimal digits


def observation_id_for(*, session_id: uuid.UUID, tool_use_id: str, attempt: int = 0) -> str:
    """The id of the observation of `tool_use_id`'s result in `session_id`: the same every time
    that result is stored (a step retried after a crash, a rebuilt history, a benchmark run again
    shows the model the same bytes), and 16 decimal digits, which are hexadecimal characters as
    the seed's `scratchpad_id` is and cost the same tokens whatever their value (random
    hexadecimal ids tokenized to between 8 and 12, so the service's estimates, and its masking
    decisions, differed run to run). `attempt` > 0 for a second store of the same result (or
    the rare id another session took)."""
    digest = hashlib.sha256(f"{session_id}:{tool_use_id}:{attempt}".encode()).digest()
    return f"{int.from_bytes(digest[:8]) % 10**OBSERVATION_ID_DIGITS:0{OBSERVATION_ID_DIGITS}d}"


def _observation_id_new(*, session_id: uuid.UUID, tool_use_id: str) -> str:
    for attempt in range(100):
        candidate = observation_id_for(session_id=session_id, tool_use_id=tool_use_id, attempt=attempt)
        if not Observation.objects.filter(pk=candidate).exists():
            return candidate
    raise RuntimeError(f"no free observation id for {tool_use_id!r}")  # 100 stores of one result


# Tools whose results are never offloaded (see the module's docstring).
NOT_OFFLOADED = {SCRATCHPAD_READ}


def _binary_chunks(data: bytes, size: int) -> Iterator[ObservationChunk]:
    for index, start in enumerate(range(0, len(data), size)):
        yield ObservationChunk(
            index=index, data=data[start : start + size], start_char=start, start_byte=start
        )


def observation_create(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    step: int,
    tool_name: str,
    tool_use_id: str,
    parts: ResultParts,
    ttl_seconds: int,
    chunk_size: int | None = None,
    now: datetime | None = None,
    indexed: bool = True,
) -> Observation:
    """Store a result's content in chunks with its summary; it expires `ttl_seconds` from now.

    The content is written in batches of CHUNK_WRITE_BATCH chunks and hashed as it goes, so
    storing costs no second copy of the value. With `indexed`, a text content's first
    characters are also a search document of the session (`recall`), in the same transaction:
    the model saw only the summary, and the content is searchable all the same. A masked
    result is stored without (`MaskedResultStore`): its message, which keeps it, is indexed.
    """
    now = now or timezone.now()
    binary = parts.is_binary
    size = chunk_size or (CHUNK_BYTES if binary else CHUNK_CHARS)
    with transaction.atomic():
        observation = Observation.objects.create(
            id=_observation_id_new(session_id=session_id, tool_use_id=tool_use_id),
            session_id=session_id,
            turn_id=turn_id,
            step=step,
            tool_name=tool_name,
            tool_use_id=tool_use_id,
            kind=ObservationKind.BINARY if binary else ObservationKind.TEXT,
            content_is_json=parts.content_is_json,
            size_bytes=0,
            char_count=len(parts.data) if binary else len(parts.text),
            line_count=0 if binary else line_count(parts.text),
            sha256="",
            chunk_size=size,
            summary="",
            metadata=parts.metadata,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds),
        )
        digest = hashlib.sha256()
        size_bytes = 0
        batch: list[ObservationChunk] = []
        chunks: Iterator[ObservationChunk]
        if binary:
            chunks = _binary_chunks(parts.data, size)
        else:
            chunks = (
                ObservationChunk(
                    index=c.index,
                    text=c.text,
                    start_char=c.start_char,
                    start_byte=c.start_byte,
                    start_line=c.start_line,
                    end_line=c.end_line,
                )
                for c in text_chunks(parts.text, size)
            )
        for chunk in chunks:
            encoded = bytes(chunk.data or b"") if binary else chunk.text.encode("utf-8")
            digest.update(encoded)
            size_bytes += len(encoded)
            chunk.observation = observation
            batch.append(chunk)
            if len(batch) >= CHUNK_WRITE_BATCH:
                ObservationChunk.objects.bulk_create(batch)
                batch = []
        if batch:
            ObservationChunk.objects.bulk_create(batch)
        observation.size_bytes = size_bytes
        observation.sha256 = digest.hexdigest()
        observation.summary = (
            summary_binary(size=size_bytes, sha256=observation.sha256) if binary else summary_text(parts.text)
        )
        observation.save(update_fields=["size_bytes", "sha256", "summary"])
        if indexed and not binary:
            core_services.recall_observation_index(
                session_id=session_id, observation_id=observation.id, text=parts.text, at=now
            )
    return observation


def observations_gc(*, now: datetime | None = None) -> int:
    """Drop the content (the chunks) of every expired observation, of any session; returns of how
    many. The observation's row (id, tool, size, summary) stays as long as its session, so a
    later read of its id is told that it expired rather than that the id is unknown. Their
    search documents go with the content."""
    expired = ObservationChunk.objects.filter(observation__expires_at__lte=now or timezone.now())
    # No ordering: a default ordering's columns would join the DISTINCT (a row per chunk).
    ids = list(expired.order_by().values_list("observation_id", flat=True).distinct())
    if ids:
        with transaction.atomic():
            expired.delete()
            core_services.recall_observations_forget(observation_ids=ids)
    return len(ids)


def _step_numbers(turn_id: uuid.UUID) -> dict[str, int]:
    """tool_use_id → the call's number in its turn: 1 for the turn's first tool call, in the
    order the model made them (the numbering of `{{stepN.field}}`)."""
    ids = ToolCall.objects.filter(turn_id=turn_id).order_by("pk").values_list("tool_use_id", flat=True)
    return {tool_use_id: number for number, tool_use_id in enumerate(ids, start=1)}


def tool_outcomes_offload(
    *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
) -> list[ToolOutcome]:
    """The outcomes as the model gets them: each large one stored and replaced by its synthetic
    observation (`raw` and `content` both), with `observation_id` for the `tool.result` event."""
    if not session.setting("offload", "enabled"):
        return outcomes
    threshold = session.setting("offload", "threshold_bytes")
    ttl = session.setting("offload", "ttl_seconds")
    large = [
        o
        for o in outcomes
        if o.name not in NOT_OFFLOADED
        and not o.fitted
        and o.raw is not None
        and result_json_size(o.raw) > threshold
    ]
    if not large:
        return outcomes
    steps = _step_numbers(turn_id)
    replaced: dict[str, ToolOutcome] = {}
    for outcome in large:
        observation = observation_create(
            session_id=session.id,
            turn_id=turn_id,
            step=steps.get(outcome.tool_use_id, 0),
            tool_name=outcome.name,
            tool_use_id=outcome.tool_use_id,
            parts=result_parts(outcome.raw),
            ttl_seconds=ttl,
        )
        synthetic = synthetic_observation(
            observation_id=observation.id,
            size_bytes=observation.size_bytes,
            kind=observation.kind,
            summary=observation.summary,
            metadata=observation.metadata,
            ok=not outcome.is_error,
        )
        replaced[outcome.tool_use_id] = replace(
            outcome,
            raw=synthetic,
            content=json.dumps(synthetic, ensure_ascii=False),
            extra={**(outcome.extra or {}), "observation_id": observation.id},
        )
    return [replaced.get(o.tool_use_id, o) for o in outcomes]


# Far enough to be "never" for a masked result: it lives as long as its session.
MASKED_LIFETIME = timedelta(days=365 * 1000)


class MaskedResultStore:
    """The store compaction masks tool results into (`Feature.result_store`): each result is kept
    whole as an observation of the session, readable from any turn with `scratchpad_read`, and
    never expires while the session exists. A result that already is a synthetic observation is
    not stored twice: its observation is kept for good instead."""

    def store(
        self,
        *,
        session: SessionSnapshot,
        turn_id: uuid.UUID,
        tool_use_id: str,
        tool_name: str,
        content: str | list[dict],
    ) -> str:
        if not session.setting("offload", "enabled"):
            return ""  # the store is switched off: the placeholder says the result is not kept
        now = timezone.now()
        if isinstance(content, str):
            try:
                value = json.loads(content)
            except ValueError:
                value = None
            if is_synthetic_observation(value):
                kept = Observation.objects.filter(pk=value["scratchpad_id"], session_id=session.id).update(
                    session_scope=True, expires_at=now + MASKED_LIFETIME
                )
                if kept:
                    return str(value["scratchpad_id"])
        step = _step_numbers(turn_id).get(tool_use_id, 0)
        with transaction.atomic():
            observation = observation_create(
                session_id=session.id,
                turn_id=turn_id,
                step=step,
                tool_name=tool_name,
                tool_use_id=tool_use_id,
                parts=result_parts(content),
                ttl_seconds=int(MASKED_LIFETIME.total_seconds()),
                now=now,
                indexed=False,
            )
            Observation.objects.filter(pk=observation.pk).update(session_scope=True)
        return observation.id


MASKED_RESULT_STORE = MaskedResultStore()
