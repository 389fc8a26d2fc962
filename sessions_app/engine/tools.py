"""Server tools: each is data (name, the seed's JSON schema) plus an async handler.

A handler returns what the tool produced (a dict, which the model receives as JSON, a string, or
content blocks) or raises `ToolError` with a message the model can read and act on. A feature
lists its tools in its `Feature` (`features.py`); there is no registry to fill.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessions_app.engine.snapshot import SessionSnapshot


class ToolError(Exception):
    """A misuse the model should read: becomes a tool_result with is_error set."""


@dataclass
class ToolContext:
    session: SessionSnapshot
    turn_id: uuid.UUID
    step: int
    tool_use_id: str
    # The sandbox APIs features hand to server tools (e.g. `sandbox["notepad"]`), by name.
    sandbox: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[ToolContext, dict], Awaitable[Any]]


@dataclass(frozen=True)
class EndTurn:
    """What a handler returns to end the turn after this step: `result` is the tool's result, and
    the turn completes with `end_turn` without calling the model again (e.g. `report_result`)."""

    result: Any


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict
    handler: Handler
    # Whether the tool is offered to this session's model (e.g. only when the notepad is on).
    enabled: Callable[[SessionSnapshot], bool] = lambda session: True
    # Whether it is offered in a given turn too (e.g. only while the turn holds observations);
    # called in a DB thread. A tool with this check is offered only when a turn is known.
    offered_in_turn: Callable[[SessionSnapshot, uuid.UUID], bool] | None = None
    # What the model is told when it calls the tool where `enabled` says no (e.g. a sub-session
    # at the depth limit); None: the generic unknown-tool error.
    refusal: Callable[[SessionSnapshot], str] | None = None
    # Consecutive calls of concurrent tools in one step run together (`asyncio.gather`) instead of
    # one after another, e.g. sub-sessions that wait for their own model; results keep the model's
    # order. A tool is concurrent only if calls of it never depend on each other's effects.
    concurrent: bool = False
    # After a step that ran this tool, the runner asks the features' history views again (e.g.
    # `end_task` collapses the task in the very next request).
    refreshes_history: bool = False

    def definition(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    @functools.cached_property
    def definition_texts(self) -> tuple[str, str]:
        """The definition's JSON as a request carries it (`tokens.json_text`) and in canonical
        form (`prepared.canonical_json`'s), encoded once: every request lists the same tools,
        and encoding them was a tenth of building one."""
        from sessions_app.engine.prepared import sorted_json
        from sessions_app.engine.tokens import json_text

        definition = self.definition()
        return json_text(definition), sorted_json(definition)
