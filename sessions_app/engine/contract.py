"""The feature contract: every type through which a feature (the notepad, the scratchpad,
observations, ...) plugs into the engine, and through which the engine reaches back.

This module is a leaf: it imports nothing else of the engine (only the neutral floor,
`sessions_app.common`). A feature imports this module, `sessions_app.common`, and the data layer
(`sessions_app.models`, `services`, `selectors`); never another engine module. The engine reads
the ordered list of features (`engine.features.features()`); nothing registers itself.

What a `Feature` offers, slot by slot (`docs/architecture.md` has the table and a worked example):
- `settings`, `settings_rules`: the session settings it owns, their defaults and validation;
- `tools`: `ToolSpec`s (a name, the seed's JSON schema, an async handler);
- `tool_source`: tools that are data, per session (an agent's authored tools), offered after
  every static tool;
- `sections`: `ContextSection`s (stable guidance, per-call system text, blocks before the latest
  user message);
- `hooks`: `ToolCallHook`s around a step's tool calls;
- `sandbox`: the APIs it hands to server tools and sandboxed code (`ToolContext.sandbox[name]`);
- `scripted_rules`: what the offline scripted model learns from it;
- `result_store`, `history_view`, `warning_notes`: compaction's cheap tier, how an epoch's
  history is shown, what the pre-compaction warning adds;
- `lifecycle`: its part of a session's export, import, deletion and long-term search index;
- `dashboard`: what operators see of it (`FeatureDashboard`): its panels on the dashboard's
  session page, its views' URLs, its memories' histories, its part of the archive stepper and of
  the context gauge, its tools that start sub-sessions, its fields on the session's admin page.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sessions_app.common.canonical import sorted_json
from sessions_app.common.estimate import json_text
from sessions_app.common.types import ModelCallData, PlannedToolCall, ToolOutcome

__all__ = [
    "PANEL_AGENT",
    "PANEL_HEAD",
    "PANEL_TAB",
    "ArchiveSection",
    "ContextSection",
    "DashboardPanel",
    "EndTurn",
    "Feature",
    "FeatureDashboard",
    "FeatureLifecycle",
    "GaugeRow",
    "Handler",
    "HistorySaving",
    "HistoryView",
    "HistoryViewSource",
    "ModelCallData",
    "PlannedToolCall",
    "ResultStore",
    "SandboxFactory",
    "ScriptedInput",
    "ScriptedReply",
    "ScriptedRule",
    "SearchDocument",
    "SessionSnapshot",
    "SettingsRules",
    "ToolCallHook",
    "ToolContext",
    "ToolError",
    "ToolInput",
    "ToolOutcome",
    "ToolSource",
    "ToolSpec",
    "Turns",
    "scripted_rule",
]


# ---------------------------------------------------------------------------
# The session, as the engine, tools and sections see it
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionSnapshot:
    """The read-only view of a session that the engine, tools and context sections work from.
    Built by the engine (`features.session_snapshot`), which hands it the features' default
    settings (`defaults`)."""

    id: uuid.UUID
    model: str
    system_prompt: str
    context_window: int
    compact_threshold: float
    settings: dict[str, Any]
    client_tools: list[dict] = field(default_factory=list)
    epoch: int = 0
    last_prompt_tokens: int | None = None
    last_estimated_tokens: int | None = None
    token_ratio: float = 1.0
    compaction_failures: int = 0
    # Where the session sits in its tree of sub-sessions: 0 and no parent for a root (whose
    # `root_id` is its own id).
    depth: int = 0
    parent_id: uuid.UUID | None = None
    root_id: uuid.UUID | None = None
    # The notepad's content as read with the row ("" while empty), which every request shows:
    # its section need not read it again. None unless the snapshot was made from a row read
    # just now (`from_session(..., with_notepad=True)`): the section then reads it itself.
    notepad: str | None = None
    # The system-prompt texts the sections pinned for this epoch, by section name (the session's
    # `context_pins` when they are this epoch's), None when none are pinned for it yet: the
    # next request pins what the sections give now (`ContextSection.pinned_system`).
    pins: Mapping[str, tuple[str, ...]] | None = None
    # The sections' changed texts anchored in this epoch's history (`ContextAnchor`), oldest
    # first: each shown, for the rest of the epoch, with the stored message it was anchored at.
    anchors: tuple[ContextAnchor, ...] = ()
    # The session's agent (DESIGN.md, "Agents"), or None: a session without one.
    agent_id: int | None = None
    # The features' default settings: `setting`'s answer where `settings` lacks a key (a session
    # created before the setting existed).
    defaults: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # `setting`'s answers, by path: a request's build asks two dozen of them (each feature's
    # `enabled`, its limits). Not copied by `dataclasses.replace`, which may change `settings`.
    _settings_read: dict[tuple[str, ...], Any] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def from_session(
        cls, session: Any, *, defaults: Mapping[str, Any], with_notepad: bool = False
    ) -> SessionSnapshot:
        """The snapshot of `session`. `with_notepad`: the caller read the row just now, in the
        call that builds the request, so its notepad is the current one (the engine's steps);
        a row kept for longer (a view's, a form's) may hold an older notepad than the database."""
        return cls(
            id=session.id,
            model=session.model,
            system_prompt=session.system_prompt,
            context_window=session.context_window,
            compact_threshold=session.compact_threshold,
            settings=session.settings,
            client_tools=list(session.client_tools or []),
            epoch=session.epoch,
            last_prompt_tokens=session.last_prompt_tokens,
            last_estimated_tokens=session.last_estimated_tokens,
            token_ratio=session.token_ratio,
            compaction_failures=session.compaction_failures,
            depth=session.depth,
            parent_id=session.parent_session_id,
            root_id=session.root_session_id or session.id,
            # Read with the row, not deferred (`get_deferred_fields` walks every field).
            notepad=(session.notepad or "") if with_notepad and "notepad" in vars(session) else None,
            pins=_epoch_pins(vars(session).get("context_pins"), session.epoch),
            anchors=_epoch_anchors(vars(session).get("context_pins"), session.epoch),
            agent_id=vars(session).get("agent_id"),
            defaults=defaults,
        )

    def pinned(self, name: str) -> tuple[str, ...] | None:
        """What section `name` pinned for this epoch, None when nothing is pinned for it yet."""
        return None if self.pins is None else self.pins.get(name)

    def setting(self, *path: str) -> Any:
        """The session's setting at `path` (e.g. "notepad", "enabled"); where the stored settings
        lack it, the features' default."""
        try:
            return self._settings_read[path]
        except KeyError:
            pass
        for tree in (self.settings, self.defaults):
            value: Any = tree
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    break
                value = value[key]
            else:
                self._settings_read[path] = value
                return value
        raise KeyError(f"no setting {'.'.join(path)}")


def _epoch_pins(stored: Any, epoch: int) -> Mapping[str, tuple[str, ...]] | None:
    """A session row's `context_pins` when they were pinned for `epoch` (None otherwise, or when
    the row was read without them)."""
    if not isinstance(stored, dict) or stored.get("epoch") != epoch:
        return None
    sections = stored.get("sections")
    if not isinstance(sections, dict):
        return None
    return {
        str(name): tuple(str(text) for text in texts)
        for name, texts in sections.items()
        if isinstance(texts, list)
    }


@dataclass(frozen=True)
class ContextAnchor:
    """A section's pinned texts as they were when they changed inside the epoch (`texts`, what
    `ContextSection.pinned_system` gave then), shown under the section's words
    (`ContextSection.pinned_changed`) with the stored message at `position`, the latest message
    of the request that first showed them, in every later request of the epoch: inside the
    cached prefix, where an edit shown with the latest message for one call only would be read
    from the cache by no request."""

    position: int
    section: str
    texts: tuple[str, ...]

    def stored(self) -> list[Any]:
        return [self.position, self.section, list(self.texts)]


def _epoch_anchors(stored: Any, epoch: int) -> tuple[ContextAnchor, ...]:
    """A session row's anchored texts when they were anchored in `epoch`, in position order
    (entries of another shape, e.g. from an edited export, are left out)."""
    if not isinstance(stored, dict) or stored.get("epoch") != epoch:
        return ()
    anchors: list[ContextAnchor] = []
    for entry in stored.get("anchors") or ():
        if (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], int)
            and not isinstance(entry[0], bool)
            and isinstance(entry[1], str)
            and isinstance(entry[2], list)
            and all(isinstance(text, str) for text in entry[2])
        ):
            anchors.append(ContextAnchor(entry[0], entry[1], tuple(entry[2])))
    return tuple(sorted(anchors, key=lambda anchor: anchor.position))


# ---------------------------------------------------------------------------
# Server tools
# ---------------------------------------------------------------------------


class ToolError(Exception):
    """A misuse the model should read: becomes a tool_result with is_error set."""


class Turns(Protocol):
    """The engine's turns, as a tool that runs another session's turn reaches them (a sub-session
    for its parent's `spawn_session`): start one, wait for it, cancel it."""

    async def start(self, *, session_id: uuid.UUID, content: str) -> uuid.UUID:
        """Begin a turn of `session_id` on the user message `content`; its id. Raises
        `services.TurnInProgress` when the session already runs one."""
        ...

    async def wait(self, turn_id: uuid.UUID) -> None:
        """Until the turn has ended (at once when it has)."""
        ...

    async def cancel(self, *, session_id: uuid.UUID, turn_id: uuid.UUID, wait_seconds: float) -> None:
        """Ask the session's running turn to stop and wait (at most `wait_seconds`) for it to end."""
        ...


@dataclass
class ToolContext:
    session: SessionSnapshot
    turn_id: uuid.UUID
    step: int
    tool_use_id: str
    # The sandbox APIs features hand to server tools (e.g. `sandbox["notepad"]`), by name.
    sandbox: dict[str, Any] = field(default_factory=dict)
    # The engine's turns (None where no turn loop runs the tool, e.g. a test calling a handler).
    turns: Turns | None = None
    # About how many tokens (the local estimate's, `sessions_app.common.estimate`) this call's
    # result may take in the next request: what the window leaves after what that request holds
    # already, the room kept for the pre-compaction warning and for an answer, shared among the
    # step's calls. A tool that reads (an archive, an observation) fills its page up to it and
    # says how to read on; a result that still does not fit becomes a tool error saying so.
    # None: no limit known (no turn loop runs the tool).
    room_tokens: int | None = None
    # The names of every static server tool of the process (`Feature.tools` of every feature,
    # offered to this session or not): what a tool that defines tools may not shadow.
    server_tool_names: frozenset[str] = frozenset()


Handler = Callable[[ToolContext, dict], Awaitable[Any]]


@dataclass(frozen=True)
class EndTurn:
    """What a handler returns to end the turn after this step: `result` is the tool's result, and
    the turn completes with `end_turn` without calling the model again (e.g. `report_result`)."""

    result: Any


@dataclass(frozen=True)
class TextLimit:
    """The most characters one text field of a tool's input may hold (`ToolSpec.text_limits`):
    a session setting of the tool's feature (`setting=("tasks", "summary_max_chars")`, read per
    session) or a named constant (`chars=NOTEPAD_MAX_CHARS, name="NOTEPAD_MAX_CHARS"`). The
    model is told the limit and its name when a call is over it; the schema it is shown does not
    carry the number, so the tools block stays the same across sessions (prompt caching)."""

    setting: tuple[str, ...] = ()
    chars: int | None = None
    name: str = ""

    def limit(self, session: SessionSnapshot) -> int:
        return int(session.setting(*self.setting)) if self.setting else int(self.chars or 0)

    def named(self) -> str:
        return "the session setting " + ".".join(self.setting) if self.setting else self.name


@dataclass(frozen=True)
class ToolSpec:
    """A server tool: data (name, the seed's JSON schema) plus an async handler.

    A handler returns what the tool produced (a dict, which the model receives as JSON, a string,
    or content blocks) or raises `ToolError` with a message the model can read and act on. Its
    input is checked against `input_schema` before it runs (`common.tool_input`): a handler gets
    the types, required fields, choices and bounds the schema states, and checks only what a
    schema cannot say."""

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
    # The schema the input is checked against where the tool takes more than the schema the model
    # is shown (e.g. seed 003's refs.set drops non-string items rather than refuse them); None:
    # `input_schema` itself.
    checked_schema: dict | None = None
    # The most characters each text field of the input may hold (a field of the input object: a
    # string, or each string of an array of strings), checked after the schema and before the
    # handler (`common.tool_input.tool_input_text_check`): a call over one is a tool error naming
    # the limit and its setting, and the handler does not run. Every text field has one.
    text_limits: Mapping[str, TextLimit] = field(default_factory=dict)
    # A reading tool that fits its result to the room the next request has itself
    # (`ToolContext.room_tokens`): its outcome is marked `fitted`, and the offload rule leaves it
    # (offloading a bounded read would only hide it behind a placeholder to read again).
    fits_room: bool = False

    @property
    def input_check_schema(self) -> dict:
        """What `common.tool_input` checks a call's input against."""
        return self.input_schema if self.checked_schema is None else self.checked_schema

    def definition(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    @functools.cached_property
    def definition_texts(self) -> tuple[str, str]:
        """The definition's JSON as a request carries it (`estimate.json_text`) and in canonical
        form (`canonical.sorted_json`), encoded once: every request lists the same tools."""
        definition = self.definition()
        return json_text(definition), sorted_json(definition)


# A feature's tools that are data (`Feature.tool_source`): the tools it offers this session now,
# e.g. the session's agent's authored tools. Called in a DB thread, for every request built and
# for a call whose name no static tool has.
ToolSource = Callable[[SessionSnapshot], Sequence[ToolSpec]]


# Builds a feature's sandbox API for one session (e.g. the notepad's read/write/append), or None
# where the session has the feature switched off.
SandboxFactory = Callable[[SessionSnapshot], Any]


# ---------------------------------------------------------------------------
# Hooks around a step's tool calls
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolInput:
    tool_use_id: str
    name: str
    input: dict
    # Set when the call must not run: the message is its tool_result (is_error).
    error: str | None = None


class ToolCallHook(Protocol):
    """Hooks around a turn's tool calls, called in feature order in a DB thread:
    - `turn_started` once, when the turn begins (e.g. garbage-collect expired rows);
    - `inputs_resolve` with the inputs of one model step's tool calls, before they are stored,
      announced (`tool.call`) or run: a hook returns each input, rewritten or not, or an error
      that becomes that call's tool_result (the call is then not run and no client is asked);
    - `outcomes_process` with the step's outcomes, before they are stored and shown to the model.
    """

    def turn_started(self, *, session: SessionSnapshot, turn_id: uuid.UUID) -> None: ...

    def inputs_resolve(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
    ) -> list[ToolInput]: ...

    def outcomes_process(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
    ) -> list[ToolOutcome]: ...


# ---------------------------------------------------------------------------
# The prompt
# ---------------------------------------------------------------------------


class ContextSection(Protocol):
    """A contributor to the prompt (the notepad, the scratchpad, ...). Called in a DB thread.

    A section may have a `name` ("notepad"): `BuiltRequest.sections` reports the tokens of its
    per-call parts (dynamic and transient: the memory it shows) under it, for the dashboard's
    context gauge; without one, its class name is used. Its stable guidance is part of the
    system prompt's count (`breakdown["system"]`).
    """

    def static_system(self, session: SessionSnapshot) -> list[str]:
        """Text for the stable system prompt (guidance): must not change during a session."""
        ...

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        """System-prompt text pinned for an epoch: what this gives at the epoch's first request
        is stored (`AgentSession.context_pins`) and shown unchanged, inside the cached prefix,
        until the next compaction starts a new epoch (`SessionSnapshot.pinned` says what is
        pinned). When what this gives changes inside the epoch, the engine shows the change
        with the latest message (`pinned_changed`), so that an edit never rewrites the cached
        prefix."""
        ...

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        """How the section shows `texts`, what `pinned_system` gives now, when they differ from
        what the epoch's requests showed of it last (its pinned texts, or its latest anchored
        change): one text block whose words say it replaces the earlier copies. The engine
        anchors it at the latest message for the rest of the epoch (`ContextAnchor`), or, once
        the epoch's anchored changes fill their share of the window, shows it for this call
        only. None: the section shows nothing of the change (it has its own way, or none)."""
        ...

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        """System-prompt sections that may change every call (after the cache breakpoint)."""
        ...

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        """Blocks put before the latest user message for this call only (never stored)."""
        ...


@dataclass(frozen=True)
class HistoryView:
    """How requests show an epoch's stored messages beyond masks (e.g. a finished task's
    collapse): the tool calls whose `tool_use` and `tool_result` blocks are left out, and tool
    results whose content is replaced by a text. The stored messages are untouched."""

    hidden: frozenset[str] = frozenset()
    replacements: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.hidden or self.replacements)


# How a feature changes the way an epoch's stored messages are shown (e.g. finished tasks are
# collapsed): (session id, epoch, the tool_use ids whose results the epoch holds) → the view.
# Runs in a DB thread, when a turn loads its history and after a step that ran a tool whose
# spec has `refreshes_history`.
HistoryViewSource = Callable[[uuid.UUID, int, Collection[str]], HistoryView]


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


# ---------------------------------------------------------------------------
# The scripted model
# ---------------------------------------------------------------------------


@dataclass
class ScriptedInput:
    body: dict[str, Any]
    user_text: str | None  # the latest user text block, when the last message holds the user's words
    # [{name, content, is_error}] when the last message holds results and no words after them
    tool_results: list[dict] | None
    tool_names: list[str]
    system_text: str
    # The reply every rule but the given one (and the built-in rules) would give to this input.
    answer_without: Callable[[ScriptedRule], ScriptedReply] | None = field(default=None, repr=False)


@dataclass
class ScriptedReply:
    text: str = ""
    tool_uses: list[tuple[str, dict]] = field(default_factory=list)


ScriptedRule = Callable[[ScriptedInput], ScriptedReply | None]


def scripted_rule(help_line: str | None = None) -> Callable[[ScriptedRule], ScriptedRule]:
    """Mark a function as a scripted rule, with its line in `help`. It registers nothing: a
    feature lists its rules in its `Feature.scripted_rules`."""

    def mark(rule: ScriptedRule) -> ScriptedRule:
        rule.help_line = help_line  # type: ignore[attr-defined]
        return rule

    return mark


# ---------------------------------------------------------------------------
# A session's life beyond its turns: export, import, deletion, long-term search
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchDocument:
    """One piece of a session's memory for the long-term search index (`recall`): `key` is unique
    within the feature and session (re-indexing replaces it), `text` is what is searched."""

    key: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class FeatureLifecycle:
    """A feature's part of a session's life outside its turns. Each runs in a DB thread, inside
    the caller's transaction; each is optional.

    - `export(session_id) -> JSON value`: the feature's rows of the session, as plain JSON, under
      the feature's name in the session's export (docs/export.md; None: nothing to carry); or an
      iterator, written as a JSON list item by item, each read as it is written (rows too large
      to hold together: it must keep no cursor open between items, as the export may ask for
      the next from another database thread);
    - `ids(new_session_id, data) -> {old id: new id}`: before anything is imported, the new ids
      of the feature's rows that other parts of the document name in their text (an observation
      id in a tool result): the importer replaces every one, everywhere in the document, so
      that the imported session names its own rows;
    - `import_(session_id, data)`: recreate them in a newly imported session from what `export`
      wrote, every id already replaced (raise `ValueError` with a message naming what is wrong:
      the whole import is rolled back);
    - `delete(session_id)`: remove what deleting the session's row would not (rows whose foreign
      key protects them, files, caches);
    - `search_documents(session_id)`: what of the session the long-term search index keeps.
    """

    export: Callable[[uuid.UUID], Any] | None = None
    ids: Callable[[uuid.UUID, Any], Mapping[str, str]] | None = None
    import_: Callable[[uuid.UUID, Any], None] | None = None
    delete: Callable[[uuid.UUID], None] | None = None
    search_documents: Callable[[uuid.UUID], Sequence[SearchDocument]] | None = None


# ---------------------------------------------------------------------------
# What operators see of a feature: the dashboard and the admin
# ---------------------------------------------------------------------------

# Where a panel sits on the session page (`DashboardPanel.place`).
PANEL_TAB = "tab"  # a tab of its own among the side panels, between Context and Archives
PANEL_HEAD = "head"  # under the session's title, above the transcript, whatever the tab
# On an agent's page (not the session page): `context` gets the agent's row (`Agent`), and the
# template is rendered with it as `agent`; `live` is not called.
PANEL_AGENT = "agent"


@dataclass(frozen=True)
class DashboardPanel:
    """A part of the operator's session page that a feature fills, in the dashboard's websocket
    too.

    - `name`: unique among the features' panels; a tab's name in the page's address (`?tab=`);
    - `template` (a template or a `{% partialdef %}` of one): rendered with the session's row as
      `session` and what `context(session)` reads;
    - `title`: the label of its tab;
    - `live(session, events, operator)`: the HTML fragments (`hx-swap-oob`) that bring the panel
      up to date after a batch of the session's events (none where no event concerns it), as the
      operator `operator` sees it (a notice of someone else's change). The dashboard's websocket
      calls it in a DB thread, for every batch but one of streamed text alone;
    - `place`: `PANEL_TAB` or `PANEL_HEAD`, or `PANEL_AGENT` for a part of an agent's page
      (rendered with the agent's row as `agent` and what `context(agent)` reads).

    `session` is the session's row (`AgentSession`: the contract names no model).
    """

    name: str
    template: str
    context: Callable[[Any], Mapping[str, Any]]
    title: str = ""
    live: Callable[[Any, Sequence[Mapping[str, Any]], str], Sequence[str]] | None = None
    place: str = PANEL_TAB


@dataclass(frozen=True)
class ArchiveSection:
    """What the dashboard's archive stepper shows of a feature as it stood when an epoch was
    archived (the notepad then): `template` rendered with `context(session_id, moment)`, the
    archive having been made at `moment` (in a DB thread)."""

    template: str
    context: Callable[[uuid.UUID, datetime], Mapping[str, Any]]


@dataclass(frozen=True)
class GaugeRow:
    """A row of the dashboard's context gauge: the per-call tokens of the feature's context
    section named `section` (`BuiltRequest.sections`), under `label`, counted apart from System.
    The gauge is refreshed live after any of `events`, the feature's events that change what the
    section shows."""

    section: str
    label: str
    events: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HistorySaving:
    """Stored history that a feature keeps out of requests (its `history_view`: a finished task's
    calls): the context gauge takes `tokens(session_id, epoch)` (in a DB thread) off its History
    row and shows them apart, under `label`."""

    label: str
    tokens: Callable[[uuid.UUID, int], int]


@dataclass(frozen=True)
class FeatureDashboard:
    """What a feature shows operators, on the dashboard and in the admin. Views and admin fields
    are named by dotted path, so that the engine, which loads the features, imports none of them.

    - `panels`: its parts of the session page (`DashboardPanel`), in order;
    - `urls`: the dotted path of a URL module of its own views (`urlpatterns`, no `app_name`),
      included at the dashboard's root: its URL names join the `dashboard:` namespace, so they
      start with the feature's name (`dashboard:notepad_edit`);
    - `histories`: the memories it keeps every version of, name → the URL of that memory's
      history page for a session id (the history pages switch between them; the archive
      stepper links to each as it was when the epoch was archived);
    - `archive`: what the archive stepper shows of it (`ArchiveSection`s);
    - `gauge_rows`, `history_saving`: its parts of the context gauge;
    - `delegating_tools`: the names of its tools whose call starts a sub-session (the child's
      `spawned_by_tool_use_id` is the call's id) and whose result begins with
      `{"session_id": "<the child's id>"`: the transcript links such a call and its result to
      the child;
    - `admin_fields`: the dotted path of a `sessions_app.admin_base.SessionAdminFields`
      subclass: its fields on the session's admin page, written through the feature's services.
    """

    panels: Sequence[DashboardPanel] = ()
    urls: str | None = None
    histories: Mapping[str, Callable[[uuid.UUID], str]] = field(default_factory=dict)
    archive: Sequence[ArchiveSection] = ()
    gauge_rows: Sequence[GaugeRow] = ()
    history_saving: HistorySaving | None = None
    delegating_tools: Collection[str] = ()
    admin_fields: str | None = None


# ---------------------------------------------------------------------------
# The feature
# ---------------------------------------------------------------------------


# A validation rule per settings leaf: ("bool",) | ("int", min, max) | ("choice", {...}) |
# ("policy_map",) (tool name or prefix* -> approval policy, merged entry by entry); a nested dict
# of rules for a group.
SettingsRules = Mapping[str, Any]


@dataclass(frozen=True)
class Feature:
    name: str
    # The session settings this feature owns (top-level keys of `settings`), with their defaults
    # and a validation rule for each leaf. A key belongs to one feature only.
    settings: Mapping[str, Any] = field(default_factory=dict)
    settings_rules: SettingsRules = field(default_factory=dict)
    tools: Sequence[ToolSpec] = ()
    # Tools that are data, per session (an agent's authored tools): offered after every static
    # tool, in feature order; one whose name a static tool of any feature, a client tool of the
    # session or an earlier source's tool has is left out. Called in a DB thread.
    tool_source: ToolSource | None = None
    # Awaited on the event loop before a turn's first model call: `tool_source` never waits (it
    # runs in a database thread, which every session shares), so what its tools need before they
    # can be listed (an MCP server's first start) is waited for here, in no database thread.
    # True when the tools it offers may have changed since the turn's first request was built
    # (that request is then built again).
    tool_source_ready: Callable[[SessionSnapshot], Awaitable[bool]] | None = None
    # Context sections, in prompt order within the feature.
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
    lifecycle: FeatureLifecycle = field(default_factory=FeatureLifecycle)
    dashboard: FeatureDashboard = field(default_factory=FeatureDashboard)
    # Default approval policies of this feature's tools (`common.approvals`: tool name or prefix*
    # -> always_allow / always_ask), after a session's `settings.approvals` and the service's
    # PALIMPSEST_APPROVALS_DEFAULT.
    approvals: Mapping[str, str] = field(default_factory=dict)
