"""Observations' hooks on the turn's tool calls (`Feature.hooks`, see `sessions_app.engine.tool_hooks`):
- at the start of a turn, expired observations' content is dropped (seed 004's `gc()`), at most
  every `PALIMPSEST_OBSERVATIONS_GC_SECONDS` in a process;
- before a step's tool calls are stored, announced or run, `{{stepN.field}}` references in
  their inputs are resolved against the full stored results (server and client tools alike, so
  a client receives the full content in `tool.call`; the stored assistant message keeps what
  the model wrote);
- before a step's results reach the model, large ones are offloaded.
"""

from __future__ import annotations

import threading
import time
import uuid

from django.conf import settings

from memory_app.observations.references import ReferenceUnresolved, tool_input_resolve
from memory_app.observations.services import observations_gc, tool_outcomes_offload
from sessions_app.engine.contract import SessionSnapshot, ToolInput, ToolOutcome


class ObservationHook:
    def __init__(self) -> None:
        self._gc_lock = threading.Lock()
        self._gc_last: float | None = None

    def turn_started(self, *, session: SessionSnapshot, turn_id: uuid.UUID) -> None:
        if self._gc_due():
            observations_gc()

    def _gc_due(self) -> bool:
        """Whether this process's last sweep is `PALIMPSEST_OBSERVATIONS_GC_SECONDS` old (then the
        caller sweeps: one database thread at a time claims it)."""
        now = time.monotonic()
        with self._gc_lock:
            if (
                self._gc_last is not None
                and now - self._gc_last < settings.PALIMPSEST_OBSERVATIONS_GC_SECONDS
            ):
                return False
            self._gc_last = now
            return True

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
