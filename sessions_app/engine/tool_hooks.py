"""Hooks around a turn's tool calls, for features that transform them without the engine knowing
the feature (the observations feature's offload and `{{stepN.field}}` references).

A feature lists its hooks in its `Feature` (`Feature.hooks`); the turn loop calls those of every
feature, in feature order:
- `turn_started` once, when the turn begins (e.g. garbage-collect expired rows);
- `inputs_resolve` with the inputs of one model step's tool calls, before they are stored,
  announced (`tool.call`) or run: a hook returns each input, rewritten or not, or an error that
  becomes that call's tool_result (the call is then not run and no client is asked);
- `outcomes_process` with the step's outcomes, before they are stored and shown to the model.
Every method runs in Django's DB thread (the ORM may be used synchronously).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sessions_app.common.types import ToolOutcome
from sessions_app.engine.contract import SessionSnapshot, ToolCallHook, ToolInput


def turn_started(*, hooks: Sequence[ToolCallHook], session: SessionSnapshot, turn_id: uuid.UUID) -> None:
    for hook in hooks:
        hook.turn_started(session=session, turn_id=turn_id)


def inputs_resolve(
    *, hooks: Sequence[ToolCallHook], session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
) -> list[ToolInput]:
    for hook in hooks:
        pending = [i for i in inputs if i.error is None]
        if not pending:
            break
        resolved = {
            i.tool_use_id: i for i in hook.inputs_resolve(session=session, turn_id=turn_id, inputs=pending)
        }
        inputs = [resolved.get(i.tool_use_id, i) for i in inputs]
    return inputs


def outcomes_process(
    *,
    hooks: Sequence[ToolCallHook],
    session: SessionSnapshot,
    turn_id: uuid.UUID,
    outcomes: list[ToolOutcome],
) -> list[ToolOutcome]:
    for hook in hooks:
        outcomes = hook.outcomes_process(session=session, turn_id=turn_id, outcomes=outcomes)
    return outcomes
