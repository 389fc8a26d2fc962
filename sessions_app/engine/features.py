"""The feature contract: how a feature (the notepad, the scratchpad, observations, ...) plugs into
the engine, and the one ordered list of features the engine reads.

A feature is a package that exports one `Feature` (its `feature.py`): its name, the settings it
owns with their defaults and validation rules, its server tools, its context sections, its hooks
on tool inputs and outcomes, the sandbox APIs it hands to server tools, and its scripted-model
rules. Nothing registers itself by being imported. The list is `settings.PALIMPSEST_FEATURES`
(dotted paths, loaded on first use like Django's MIDDLEWARE), preceded by the engine's own core
feature; its order is the order of the sections in the system prompt and of the tools in each
request (and so what prompt caching sees), and the order in which scripted rules are tried.

Features import this module (and the engine types it re-exports); the engine never imports a
feature module: it only loads what the setting names.

`docs/architecture.md` walks through adding a feature.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from sessions_app.engine.context import ContextSection, HistoryView
from sessions_app.engine.providers.scripted import ScriptedInput, ScriptedReply, ScriptedRule, scripted_rule
from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.engine.tool_hooks import ToolCallHook, ToolInput
from sessions_app.engine.tools import EndTurn, Handler, ToolContext, ToolError, ToolSpec
from sessions_app.engine.types import ModelCallData, PlannedToolCall, ToolOutcome

__all__ = [
    "ContextSection",
    "EndTurn",
    "Feature",
    "FeatureSet",
    "HistoryView",
    "HistoryViewSource",
    "Handler",
    "ModelCallData",
    "ResultStore",
    "PlannedToolCall",
    "SandboxFactory",
    "ScriptedInput",
    "ScriptedReply",
    "ScriptedRule",
    "SessionSnapshot",
    "ToolCallHook",
    "ToolContext",
    "ToolError",
    "ToolInput",
    "ToolOutcome",
    "ToolSpec",
    "features",
    "scripted_rule",
]

# Builds a feature's sandbox API for one session (e.g. the notepad's read/write/append), or None
# where the session has the feature switched off.
SandboxFactory = Callable[[SessionSnapshot], Any]


class ResultStore(Protocol):
    """Where compaction's cheap tier keeps a masked tool result whole (seed 004's observation
    store): returns the id the model reads it back with. Runs in a DB thread."""

    def store(
        self,
        *,
        session: SessionSnapshot,
        turn_id: uuid.UUID,
        tool_use_id: str,
        tool_name: str,
        content: str | list[dict],
    ) -> str: ...


# How a feature changes the way an epoch's stored messages are shown (e.g. finished tasks are
# collapsed): (session id, epoch, the tool_use ids whose results the epoch holds) → the view.
# Runs in a DB thread, when a turn loads its history and after a step that ran a tool whose
# spec has `refreshes_history`.
HistoryViewSource = Callable[[uuid.UUID, int, Collection[str]], HistoryView]


# A validation rule per settings leaf: ("bool",) | ("int", min, max) | ("choice", {...}); a nested
# dict of rules for a group.
SettingsRules = Mapping[str, Any]


@dataclass(frozen=True)
class Feature:
    name: str
    # The session settings this feature owns (top-level keys of `settings`), with their defaults
    # and a validation rule for each leaf. A key belongs to one feature only.
    settings: Mapping[str, Any] = field(default_factory=dict)
    settings_rules: SettingsRules = field(default_factory=dict)
    tools: Sequence[ToolSpec] = ()
    # Context sections, in prompt order within the feature. A section has a `name` (the context
    # gauge reports its tokens under it) and says what goes in the system prompt's stable part,
    # its per-call part, and before the latest user message (see `context.ContextSection`).
    sections: Sequence[ContextSection] = ()
    hooks: Sequence[ToolCallHook] = ()
    # `ctx.sandbox[name]` of every server tool call: name → factory.
    sandbox: Mapping[str, SandboxFactory] = field(default_factory=dict)
    # Tried in order, before the scripted model's built-in rules; a rule's `help_line` (set by
    # `scripted_rule`) is listed by the scripted model's `help`.
    scripted_rules: Sequence[ScriptedRule] = ()
    # How the texts of this feature's `message_prefix` blocks begin, so that the scripted model
    # tells them from the user's words (after a turn's tool results, in the same user message).
    context_openings: Sequence[str] = ()
    # Keeps tool results that compaction masks (at most one feature offers it).
    result_store: ResultStore | None = None
    history_view: HistoryViewSource | None = None
    # Texts added after seed 000's pre-compaction warning (each its own text block), for this
    # session; runs in a DB thread.
    warning_notes: Callable[[SessionSnapshot], list[str]] | None = None


class FeatureSet:
    """The features of this process, in order, and what the engine reads off them."""

    def __init__(self, features: Sequence[Feature]) -> None:
        self.features = tuple(features)
        self.tools: tuple[ToolSpec, ...] = tuple(t for f in self.features for t in f.tools)
        self._tools_by_name: dict[str, ToolSpec] = {}
        for spec in self.tools:
            if spec.name in self._tools_by_name:
                raise ValueError(f"two features offer a server tool named {spec.name!r}")
            self._tools_by_name[spec.name] = spec
        self.sections: tuple[ContextSection, ...] = tuple(s for f in self.features for s in f.sections)
        self.hooks: tuple[ToolCallHook, ...] = tuple(h for f in self.features for h in f.hooks)
        self.scripted_rules: tuple[ScriptedRule, ...] = tuple(
            r for f in self.features for r in f.scripted_rules
        )
        self.context_openings: tuple[str, ...] = tuple(o for f in self.features for o in f.context_openings)
        stores = [f.result_store for f in self.features if f.result_store is not None]
        if len(stores) > 1:
            raise ValueError("two features offer a result store")
        self.result_store: ResultStore | None = stores[0] if stores else None
        self.view_sources = tuple(f.history_view for f in self.features if f.history_view is not None)
        self.note_sources = tuple(f.warning_notes for f in self.features if f.warning_notes is not None)
        self.sandbox_factories: dict[str, SandboxFactory] = {}
        self.default_settings: dict[str, Any] = {}
        self.settings_rules: dict[str, Any] = {}
        for feature in self.features:
            for name, factory in feature.sandbox.items():
                if name in self.sandbox_factories:
                    raise ValueError(f"two features offer a sandbox API named {name!r}")
                self.sandbox_factories[name] = factory
            for key, value in feature.settings.items():
                if key in self.default_settings:
                    raise ValueError(f"two features own the setting {key!r}")
                if key not in feature.settings_rules:
                    raise ValueError(f"feature {feature.name!r} has no validation rule for setting {key!r}")
                self.default_settings[key] = copy.deepcopy(value)
                self.settings_rules[key] = feature.settings_rules[key]

    def tool(self, name: str) -> ToolSpec | None:
        return self._tools_by_name.get(name)

    def tool_names(self) -> set[str]:
        return set(self._tools_by_name)

    def tools_for_session(
        self, session: SessionSnapshot, *, turn_id: uuid.UUID | None = None
    ) -> list[ToolSpec]:
        """The tools offered to the session's model (in `turn_id`, when given), in feature order."""
        return [
            spec
            for spec in self.tools
            if spec.enabled(session)
            and (
                spec.offered_in_turn is None
                or (turn_id is not None and spec.offered_in_turn(session, turn_id))
            )
        ]

    def sandbox_for(self, session: SessionSnapshot) -> dict[str, Any]:
        """The sandbox APIs of `session`, for one tool call's `ToolContext.sandbox`."""
        built = {name: make(session) for name, make in self.sandbox_factories.items()}
        return {name: api for name, api in built.items() if api is not None}

    def history_view(self, session_id: uuid.UUID, epoch: int, results: Collection[str]) -> HistoryView:
        """Every feature's view of the epoch, combined (runs in a DB thread)."""
        hidden: set[str] = set()
        replacements: dict[str, str] = {}
        for source in self.view_sources:
            view = source(session_id, epoch, results)
            hidden |= view.hidden
            replacements.update(view.replacements)
        return HistoryView(frozenset(hidden), replacements)

    def warning_notes(self, session: SessionSnapshot) -> list[str]:
        """What features add to the pre-compaction warning (runs in a DB thread)."""
        return [note for source in self.note_sources for note in source(session)]

    def help_lines(self) -> list[str]:
        return [line for rule in self.scripted_rules if (line := getattr(rule, "help_line", None))]


@cache
def features() -> FeatureSet:
    """The engine's core feature, then `settings.PALIMPSEST_FEATURES`, loaded once per process
    (and again when a test overrides the setting)."""
    from sessions_app.engine.core import CORE_FEATURE

    loaded = [CORE_FEATURE]
    for path in django_settings.PALIMPSEST_FEATURES:
        feature = import_string(path)
        if not isinstance(feature, Feature):
            raise TypeError(f"{path} is not a Feature")
        loaded.append(feature)
    return FeatureSet(loaded)


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "PALIMPSEST_FEATURES":
        features.cache_clear()


setting_changed.connect(_reload)
