"""`FeatureSet`: the features of a process, in order, and what the engine reads off them (the
tools of a request, the sections, hooks, sandbox APIs, scripted rules, settings, dashboard parts).
Built by the loader (`engine.features.features()`); engine modules below the loader take it as
an argument."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

from sessions_app.common.tool_input import tool_schema_unsupported, tool_text_limits_unsupported
from sessions_app.engine.contract import (
    ArchiveSection,
    ContextSection,
    DashboardPanel,
    Feature,
    FeatureLifecycle,
    GaugeRow,
    HistorySaving,
    HistoryView,
    ResultStore,
    SandboxFactory,
    ScriptedRule,
    SessionSnapshot,
    ToolCallHook,
    ToolSource,
    ToolSpec,
)
from sessions_app.validation import SettingsSchema

__all__ = ["FeatureSet"]


class FeatureSet:
    """The features of this process, in order, and what the engine reads off them."""

    def __init__(self, features: Sequence[Feature]) -> None:
        self.features = tuple(features)
        self.tools: tuple[ToolSpec, ...] = tuple(t for f in self.features for t in f.tools)
        self._tools_by_name: dict[str, ToolSpec] = {}
        for spec in self.tools:
            if spec.name in self._tools_by_name:
                raise ValueError(f"two features offer a server tool named {spec.name!r}")
            # Every call's input is checked against it: a keyword the checker does not check would
            # be a promise to the model that nothing keeps.
            unchecked = tool_schema_unsupported(spec.input_check_schema)
            unchecked += tool_text_limits_unsupported(spec.input_check_schema, spec.text_limits)
            if unchecked:
                raise ValueError(
                    f"the tool {spec.name!r} has a schema the argument check does not cover: "
                    + ", ".join(unchecked)
                )
            self._tools_by_name[spec.name] = spec
        self._static_names = frozenset(self._tools_by_name)
        self.tool_sources: tuple[ToolSource, ...] = tuple(
            f.tool_source for f in self.features if f.tool_source is not None
        )
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
        self.settings_schema = SettingsSchema(rules=self.settings_rules, defaults=self.default_settings)
        # The features' default approval policies, one map (`common.approvals`).
        self.approval_defaults: dict[str, str] = {}
        for feature in self.features:
            for key, policy in feature.approvals.items():
                if key in self.approval_defaults:
                    raise ValueError(f"two features set the approval default of {key!r}")
                self.approval_defaults[key] = policy
        for spec in self.tools:
            for name, limit in spec.text_limits.items():
                bound: Any = self.default_settings
                for key in limit.setting:
                    bound = bound.get(key) if isinstance(bound, dict) else None
                if type(bound if limit.setting else limit.chars) is not int:
                    raise ValueError(
                        f"the tool {spec.name!r} bounds {name!r} by no integer setting or constant"
                    )
        self.lifecycles: tuple[tuple[str, FeatureLifecycle], ...] = tuple(
            (f.name, f.lifecycle) for f in self.features
        )
        # What operators see of the features (`FeatureDashboard`), in feature order: the
        # dashboard and the admin read these, the engine none.
        boards = [f.dashboard for f in self.features]
        self.panels: tuple[DashboardPanel, ...] = tuple(p for b in boards for p in b.panels)
        self.dashboard_urls: tuple[str, ...] = tuple(b.urls for b in boards if b.urls)
        self.memory_histories: dict[str, Callable[[uuid.UUID], str]] = {}
        for board in boards:
            for name, url in board.histories.items():
                if name in self.memory_histories:
                    raise ValueError(f"two features keep a history named {name!r}")
                self.memory_histories[name] = url
        self.archive_sections: tuple[ArchiveSection, ...] = tuple(s for b in boards for s in b.archive)
        self.gauge_rows: tuple[GaugeRow, ...] = tuple(r for b in boards for r in b.gauge_rows)
        self.history_savings: tuple[HistorySaving, ...] = tuple(
            b.history_saving for b in boards if b.history_saving is not None
        )
        self.delegating_tools: frozenset[str] = frozenset(t for b in boards for t in b.delegating_tools)
        self.admin_fields: tuple[str, ...] = tuple(b.admin_fields for b in boards if b.admin_fields)
        panel_names: set[str] = set()
        for panel in self.panels:
            if panel.name in panel_names:
                raise ValueError(f"two features offer a dashboard panel named {panel.name!r}")
            panel_names.add(panel.name)

    def tool(self, name: str) -> ToolSpec | None:
        return self._tools_by_name.get(name)

    def tool_names(self) -> set[str]:
        """The names of every static server tool (offered to a given session or not)."""
        return set(self._tools_by_name)

    @property
    def static_tool_names(self) -> frozenset[str]:
        return self._static_names

    def tools_for_session(
        self, session: SessionSnapshot, *, turn_id: uuid.UUID | None = None
    ) -> list[ToolSpec]:
        """The tools offered to the session's model (in `turn_id`, when given): the static ones
        in feature order, then the sources' (`sourced_tools`). Runs in a DB thread."""
        static = [
            spec
            for spec in self.tools
            if spec.enabled(session)
            and (
                spec.offered_in_turn is None
                or (turn_id is not None and spec.offered_in_turn(session, turn_id))
            )
        ]
        return static + self.sourced_tools(session) if self.tool_sources else static

    def sourced_tools(self, session: SessionSnapshot) -> list[ToolSpec]:
        """The features' tools that are data (`Feature.tool_source`) for `session`, in feature
        order. Left out: a name a static tool of any feature has (offered or not), a client tool
        of the session, or an earlier source's tool, and a schema the input check does not cover
        (each source checks its tools when they are defined; this keeps the promise anyway).
        Runs in a DB thread."""
        taken = set(self._static_names) | {t["name"] for t in session.client_tools}
        offered: list[ToolSpec] = []
        for source in self.tool_sources:
            for spec in source(session):
                if spec.name in taken or tool_schema_unsupported(spec.input_check_schema):
                    continue
                taken.add(spec.name)
                offered.append(spec)
        return offered

    def sourced_tool(self, session: SessionSnapshot, name: str) -> ToolSpec | None:
        """The sources' tool `name` for `session` (None: no source offers it). Runs in a DB
        thread."""
        if not self.tool_sources or name in self._static_names:
            return None
        return next((spec for spec in self.sourced_tools(session) if spec.name == name), None)

    def offered_names(self, session: Any) -> list[str]:
        """The names of the server tools a session row's model is offered now, in order."""
        return [spec.name for spec in self.tools_for_session(self.snapshot(session))]

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

    async def tool_sources_ready(self, session: SessionSnapshot) -> bool:
        """Await every feature's `tool_source_ready` (on the event loop, together): True when one
        says the session's tools may have changed since its request was built."""
        waits = [f.tool_source_ready(session) for f in self.features if f.tool_source_ready is not None]
        return any(await asyncio.gather(*waits)) if waits else False

    def warning_notes(self, session: SessionSnapshot) -> list[str]:
        """What features add to the pre-compaction warning (runs in a DB thread)."""
        return [note for source in self.note_sources for note in source(session)]

    def snapshot(self, session: Any, *, with_notepad: bool = False) -> SessionSnapshot:
        """The snapshot of a session row, with these features' default settings."""
        return SessionSnapshot.from_session(
            session, defaults=self.default_settings, with_notepad=with_notepad
        )

    def help_lines(self) -> list[str]:
        return [line for rule in self.scripted_rules if (line := getattr(rule, "help_line", None))]
