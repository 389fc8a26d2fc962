"""Hooks around a turn's tool calls, for features that transform them without the engine knowing
the feature (observation offload and `{{stepN.field}}` references, in memory_app).

A feature appends an object to `TOOL_HOOKS` at import. The turn loop calls, in this order:
- `turn_started` once, when the turn begins (e.g. garbage-collect expired rows);
- `inputs_resolve` with the inputs of one model step's tool calls, before they are stored,
  announced (`tool.call`) or run: a hook returns each input, rewritten or not, or an error that
  becomes that call's tool_result (the call is then not run and no client is asked);
- `outcomes_process` with the step's outcomes, before they are stored and shown to the model.
Every method runs in Django's DB thread (the ORM may be used synchronously).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.services import ToolOutcome


@dataclass(frozen=True)
class ToolInput:
    tool_use_id: str
    name: str
    input: dict
    # Set when the call must not run: the message is its tool_result (is_error).
    error: str | None = None


class ToolCallHook(Protocol):
    def turn_started(self, *, session: SessionSnapshot, turn_id: uuid.UUID) -> None: ...

    def inputs_resolve(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
    ) -> list[ToolInput]: ...

    def outcomes_process(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
    ) -> list[ToolOutcome]: ...


# Feature modules append themselves at import (memory_app's ready()).
TOOL_HOOKS: list[ToolCallHook] = []


def turn_started(*, session: SessionSnapshot, turn_id: uuid.UUID) -> None:
    for hook in TOOL_HOOKS:
        hook.turn_started(session=session, turn_id=turn_id)


def inputs_resolve(
    *, session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
) -> list[ToolInput]:
    for hook in TOOL_HOOKS:
        pending = [i for i in inputs if i.error is None]
        if not pending:
            break
        resolved = {
            i.tool_use_id: i for i in hook.inputs_resolve(session=session, turn_id=turn_id, inputs=pending)
        }
        inputs = [resolved.get(i.tool_use_id, i) for i in inputs]
    return inputs


def outcomes_process(
    *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
) -> list[ToolOutcome]:
    for hook in TOOL_HOOKS:
        outcomes = hook.outcomes_process(session=session, turn_id=turn_id, outcomes=outcomes)
    return outcomes
