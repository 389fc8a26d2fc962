"""Observations' hooks on the turn's tool calls (`Feature.hooks`, see `sessions_app.engine.tool_hooks`):
- at the start of every turn, expired observations' content is dropped (seed 004's `gc()`);
- before a step's tool calls are stored, announced or run, `{{stepN.field}}` references in
  their inputs are resolved against the full stored results (server and client tools alike, so
  a client receives the full content in `tool.call`; the stored assistant message keeps what
  the model wrote);
- before a step's results reach the model, large ones are offloaded.
"""

from __future__ import annotations

import uuid

from memory_app.observations.references import ReferenceUnresolved, tool_input_resolve
from memory_app.observations.services import observations_gc, tool_outcomes_offload
from sessions_app.engine.features import SessionSnapshot, ToolInput, ToolOutcome


class ObservationHook:
    def turn_started(self, *, session: SessionSnapshot, turn_id: uuid.UUID) -> None:
        observations_gc()

    def inputs_resolve(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
    ) -> list[ToolInput]:
        resolved = []
        for item in inputs:
            try:
                tool_input = tool_input_resolve(session_id=session.id, turn_id=turn_id, tool_input=item.input)
            except ReferenceUnresolved as exc:
                resolved.append(ToolInput(item.tool_use_id, item.name, item.input, error=str(exc)))
            else:
                resolved.append(ToolInput(item.tool_use_id, item.name, tool_input))
        return resolved

    def outcomes_process(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
    ) -> list[ToolOutcome]:
        return tool_outcomes_offload(session=session, turn_id=turn_id, outcomes=outcomes)


OBSERVATION_HOOK = ObservationHook()
