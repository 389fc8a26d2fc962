"""`{{stepN.field}}` references (seed 004): a tool input may name a field of an earlier result of
the turn, and gets that field of the stored full result, never of the summary the model saw."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.utils import timezone

from memory_app.observations.content import (
    FieldMissing,
    ResultParts,
    is_synthetic_observation,
    parts_field,
    references_in,
    references_substitute,
    result_json_size,
    result_parts,
)
from memory_app.observations.models import Observation, ObservationChunk, ObservationKind
from sessions_app.models import ToolCall


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
