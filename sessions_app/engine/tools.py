"""Server tools: each is data (name, the seed's JSON schema) plus an async handler.

A handler returns what the tool produced (a dict, which the model receives as JSON, a string, or
content blocks) or raises `ToolError` with a message the model can read and act on. One registry
holds every server tool; a family module registers its tools when imported (see TOOL_FAMILIES).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessions_app.engine.snapshot import SessionSnapshot

# Modules that register server tools, imported once when the registry is first used.
TOOL_FAMILIES: list[str] = []


class ToolError(Exception):
    """A misuse the model should read: becomes a tool_result with is_error set."""


@dataclass
class ToolContext:
    session: SessionSnapshot
    turn_id: uuid.UUID
    step: int
    tool_use_id: str
    # Extension points a tool family hangs its sandbox API on (e.g. `sandbox["notepad"]`).
    sandbox: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[ToolContext, dict], Awaitable[Any]]

# Sandbox APIs handed to every server tool as `ctx.sandbox[name]` (e.g. the session notepad's
# read/write/append): a feature registers a factory that builds its API for a session, or returns
# None where the session has the feature switched off.
SANDBOX_FACTORIES: dict[str, Callable[[SessionSnapshot], Any]] = {}


def sandbox_for(session: SessionSnapshot) -> dict[str, Any]:
    """The sandbox APIs of `session`, for one tool call's `ToolContext.sandbox`."""
    built = {name: make(session) for name, make in SANDBOX_FACTORIES.items()}
    return {name: api for name, api in built.items() if api is not None}


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

    def definition(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._loaded = False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in TOOL_FAMILIES:
                importlib.import_module(module)

    def register(self, spec: ToolSpec) -> ToolSpec:
        if spec.name in self._tools and self._tools[spec.name] is not spec:
            raise ValueError(f"a server tool named {spec.name!r} is registered already")
        self._tools[spec.name] = spec
        return spec

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def all(self) -> list[ToolSpec]:
        self._load()
        return list(self._tools.values())

    def names(self) -> set[str]:
        return {spec.name for spec in self.all()}

    def for_session(self, session: SessionSnapshot, *, turn_id: uuid.UUID | None = None) -> list[ToolSpec]:
        """The tools offered to the session's model (in `turn_id`, when given)."""
        return [
            spec
            for spec in self.all()
            if spec.enabled(session)
            and (
                spec.offered_in_turn is None
                or (turn_id is not None and spec.offered_in_turn(session, turn_id))
            )
        ]

    def get(self, name: str) -> ToolSpec | None:
        self._load()
        return self._tools.get(name)


registry = ToolRegistry()
