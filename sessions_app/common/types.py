"""The engine's own data types, shared by the turn loop, the services that store a turn's work, and
the features that transform it (through `features.Feature` hooks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StoredMessage:
    position: int
    role: str
    content: list[dict]
    token_estimate: int


@dataclass(frozen=True)
class ToolOutcome:
    tool_use_id: str
    name: str
    # What the tool returned (stored on the ToolCall) and what the model is given.
    raw: Any
    content: str | list[dict]
    is_error: bool
    extra: dict | None = None  # additional fields of the tool.result event (e.g. observation_id)
    ends_turn: bool = False  # the tool asked to end the turn after this step (`tools.EndTurn`)
    fitted: bool = False  # a reading tool fitted it to the room itself (`ToolSpec.fits_room`)


@dataclass(frozen=True)
class PlannedToolCall:
    tool_use_id: str
    name: str
    input: dict
    executor: str
    # `pending` when the call waits for an approval (`common.approvals`), else "" (or, read back
    # for a turn's repair, its answer).
    approval: str = ""


@dataclass(frozen=True)
class ModelCallData:
    """One model call as recorded (the request's record and hash, timings, usage, response)."""

    provider: str
    model: str
    step: int
    purpose: str
    request_record: dict
    request_sha256: str
    request_bytes: int
    stable_prefix_bytes: int
    estimated_prompt_tokens: int
    started_at: Any
    duration_ms: int
    first_token_ms: int | None
    response: dict | None
    stop_reason: str
    usage: dict[str, int]
    error: str = ""
    predicted_prompt_tokens: int = 0
    # The parts `request_record` names (`{"$part": sha256}`), by hash: their canonical JSON,
    # stored with the record (`RequestPart`) unless the process stored them already.
    request_parts: dict[str, str] = field(default_factory=dict)
