"""Every read of the operator dashboard, composed from the apps' selectors.

Operators may see every session, but a session, archive, model call or observation named in a
URL is always looked up within its session: a bad or foreign id is `NotFound`, never a crash.
Each selector runs a bounded number of queries, whatever the size of the session.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from memory_app.notepad import selectors as memory_selectors
from memory_app.observations.models import Observation
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.selectors import scratchpad_get
from memory_app.scratchpad.services import ScratchpadLimits
from sessions_app import selectors
from sessions_app.dashboard import subsessions, transcript
from sessions_app.engine import compaction
from sessions_app.engine.context import build_request
from sessions_app.engine.features import features
from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.models import (
    AgentSession,
    Archive,
    Message,
    ModelCall,
    SessionEvent,
    SessionStatus,
    ToolCall,
)

SESSION_LIST_PAGE_SIZE = 50
TRANSCRIPT_PAGE_SIZE = 60
ARCHIVE_MESSAGES_PAGE_SIZE = 50
TIMELINE_SIZE = 60
NOTEPAD_REVISIONS_SHOWN = 30
SCRATCHPAD_REVISIONS_SHOWN = 10
OBSERVATIONS_SHOWN = 50
MODEL_CALLS_SHOWN = 30
# The prompt inspector shows a request's last messages; the whole body is a download away.
INSPECTOR_MESSAGES_SHOWN = 40
# A running step's text so far is the run of deltas at the end of the event log (bounded).
STREAM_TAIL_MAX_EVENTS = 5000


class NotFound(Exception):
    """No such session (or no such thing in this session)."""


def _uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError) as exc:
        raise NotFound from exc


def session_get_for_operator(*, session_id: Any) -> AgentSession:
    session = AgentSession.objects.filter(pk=_uuid(session_id)).first()
    if session is None:
        raise NotFound
    return session


# ---------------------------------------------------------------------------
# The session list
# ---------------------------------------------------------------------------
def _count_of(model: Any) -> Coalesce:
    counted = (
        model.objects.filter(session=OuterRef("pk"))
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def session_list(*, query: str = "", status: str = "", model: str = "") -> QuerySet[AgentSession]:
    """Sessions, latest activity first, with `message_count`, `compaction_count` and
    `descendant_count` (sub-sessions).

    `query` matches the title, the model, the owner's token name or the start of the id. Without
    one, only roots are listed: sub-sessions are shown under their root.
    """
    sessions = AgentSession.objects.select_related("owner").annotate(
        message_count=_count_of(Message),
        compaction_count=_count_of(Archive),
        descendant_count=subsessions.descendant_count(),
    )
    if not query.strip():
        sessions = sessions.filter(parent_session__isnull=True)
    if status in SessionStatus.values:
        sessions = sessions.filter(status=status)
    if model:
        sessions = sessions.filter(model=model)
    query = query.strip()
    if query:
        match = Q(title__icontains=query) | Q(model__icontains=query) | Q(owner__name__icontains=query)
        hex_part = query.replace("-", "").lower()
        if hex_part and all(c in "0123456789abcdef" for c in hex_part):
            try:
                match |= Q(pk=uuid.UUID(query))
            except ValueError:
                match |= Q(pk__istartswith=query.lower())
        sessions = sessions.filter(match)
    return sessions.order_by("-last_activity_at")


def session_list_row(
    *, session_id: Any, query: str = "", status: str = "", model: str = ""
) -> AgentSession | None:
    """One session of `session_list` (None when it does not match the filters)."""
    return session_list(query=query, status=status, model=model).filter(pk=_uuid(session_id)).first()


def session_models() -> list[str]:
    return list(AgentSession.objects.order_by("model").values_list("model", flat=True).distinct())


# ---------------------------------------------------------------------------
# The transcript
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TranscriptPage:
    items: list[transcript.TranscriptItem]
    # Load the page before this position next (None: this page starts the session).
    older_before: int | None


def transcript_page(
    *, session_id: uuid.UUID, before_position: int | None = None, limit: int = TRANSCRIPT_PAGE_SIZE
) -> TranscriptPage:
    """The `limit` messages before `before_position` (the latest ones without it), every epoch,
    as transcript items in order. Three queries, whatever the session's length."""
    messages_qs = Message.objects.filter(session_id=session_id)
    if before_position is not None:
        messages_qs = messages_qs.filter(position__lt=before_position)
    messages = list(
        messages_qs.only("position", "epoch", "role", "content", "metadata").order_by("-position")[
            : limit + 1
        ]
    )
    has_older = len(messages) > limit
    messages = list(reversed(messages[:limit]))
    names = dict(
        ToolCall.objects.filter(
            session_id=session_id, tool_use_id__in=transcript.tool_use_ids(messages)
        ).values_list("tool_use_id", "name")
    )
    summaries = {
        str(pk): summary
        for pk, summary in Archive.objects.filter(
            session_id=session_id, pk__in=transcript.archive_ids(messages)
        ).values_list("pk", "summary")
    }
    items = transcript.items_from_messages(messages, tool_names=names, summaries=summaries)
    return TranscriptPage(
        items=subsessions.transcript_link_children(session_id=session_id, items=items),
        older_before=messages[0].position if has_older and messages else None,
    )


def stream_in_progress(*, session: AgentSession) -> str:
    """The text a running model step has streamed so far (not yet stored as a message)."""
    if session.current_turn_id is None:
        return ""
    tail = SessionEvent.objects.filter(session_id=session.pk).order_by("-seq").values_list("type", "payload")
    parts: list[str] = []
    for event_type, payload in tail[:STREAM_TAIL_MAX_EVENTS]:
        if event_type != "assistant.delta":
            break
        parts.append(str(payload.get("text", "")))
    return "".join(reversed(parts))


def timeline(*, session_id: uuid.UUID, limit: int = TIMELINE_SIZE) -> list[dict[str, Any]]:
    """The latest events as frames, newest first."""
    events = SessionEvent.objects.filter(session_id=session_id).order_by("-seq")[:limit]
    return [event.as_frame() for event in events]


# ---------------------------------------------------------------------------
# The context gauge
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GaugePart:
    key: str
    label: str
    tokens: int
    percent: float  # of the context window
    share: float  # of the estimated prompt


@dataclass(frozen=True)
class ContextGauge:
    parts: list[GaugePart]
    estimated_tokens: int
    threshold_tokens: int
    window: int
    last_prompt_tokens: int | None
    token_ratio: float

    @property
    def estimated_percent(self) -> float:
        return min(100.0, 100.0 * self.estimated_tokens / self.window)

    @property
    def threshold_percent(self) -> float:
        return 100.0 * self.threshold_tokens / self.window

    @property
    def over_threshold(self) -> bool:
        return self.estimated_tokens > self.threshold_tokens


GAUGE_LABELS = {
    "system": "System",
    "notepad": "Notepad",
    "scratchpad": "Scratchpad",
    "history": "History",
    "tools": "Tools",
}


def context_gauge(*, session: AgentSession) -> ContextGauge:
    """The next request's estimated prompt tokens, split by section, against threshold and window.

    The request is built as the engine builds it (the same context sections and tools), except
    that the history's tokens are the sum of its messages' stored estimates (one aggregate, never
    the whole history loaded). The local counts are scaled so that they add up to the calibrated
    estimate compaction decides on (`compaction.estimate_prompt_tokens`: the provider's count of
    the previous prompt plus the session's token ratio times what changed).
    """
    snapshot = SessionSnapshot.from_session(session)
    built = build_request(
        session=snapshot,
        history=[],
        server_tools=features().tools_for_session(snapshot),
        max_tokens=settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
    )
    history = Message.objects.filter(session_id=session.pk, epoch=session.epoch).aggregate(
        total=Coalesce(Sum("token_estimate"), 0)
    )["total"]
    notepad = built.sections.get("notepad", 0)
    scratchpad = built.sections.get("scratchpad", 0)
    prompt_text = built.breakdown["system"] + built.breakdown["dynamic_system"] + built.breakdown["transient"]
    local = {
        "system": max(0, prompt_text - notepad - scratchpad),
        "notepad": notepad,
        "scratchpad": scratchpad,
        "history": history,
        "tools": built.breakdown["tools"],
    }
    local_total = sum(local.values())
    estimated = compaction.estimate_prompt_tokens(snapshot, local_total)
    scale = estimated / local_total if local_total else snapshot.token_ratio
    window = max(1, session.context_window)
    parts = [
        GaugePart(
            key,
            GAUGE_LABELS[key],
            round(tokens * scale),
            100.0 * tokens * scale / window,
            100.0 * tokens / local_total if local_total else 0.0,
        )
        for key, tokens in local.items()
    ]
    return ContextGauge(
        parts=parts,
        estimated_tokens=estimated,
        threshold_tokens=compaction.threshold_tokens(snapshot),
        window=window,
        last_prompt_tokens=session.last_prompt_tokens,
        token_ratio=session.token_ratio,
    )


# ---------------------------------------------------------------------------
# The prompt inspector
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class InspectedBlock:
    type: str
    text: str  # the text of a text block, else the block as JSON
    cached: bool  # carries a cache breakpoint (cache_control)


@dataclass(frozen=True)
class InspectedMessage:
    index: int
    role: str
    blocks: list[InspectedBlock]


@dataclass(frozen=True)
class InspectedTool:
    name: str
    definition_json: str
    cached: bool


@dataclass(frozen=True)
class InspectedRequest:
    call: ModelCall
    body: dict[str, Any]
    verified: bool
    system: list[InspectedBlock]
    tools: list[InspectedTool]
    messages: list[InspectedMessage]  # the last INSPECTOR_MESSAGES_SHOWN
    hidden_messages: int
    breakpoints: int
    stable_prefix_ratio: float
    previous_id: int | None
    next_id: int | None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _inspected_block(block: Any) -> InspectedBlock:
    if not isinstance(block, dict):
        return InspectedBlock("text", str(block), False)
    cached = "cache_control" in block
    if block.get("type") == "text":
        return InspectedBlock("text", str(block.get("text", "")), cached)
    shown = {k: v for k, v in block.items() if k != "cache_control"}
    return InspectedBlock(str(block.get("type")), _json(shown), cached)


def model_call_get(*, session_id: uuid.UUID, call_id: Any = None) -> ModelCall | None:
    """The session's model call `call_id`, or its latest; None when it has made none."""
    calls = ModelCall.objects.filter(session_id=session_id)
    if call_id in (None, ""):
        return calls.order_by("-started_at", "-pk").first()
    try:
        pk = int(call_id)
    except (TypeError, ValueError) as exc:
        raise NotFound from exc
    call = calls.filter(pk=pk).first()
    if call is None:
        raise NotFound
    return call


def request_inspect(*, call: ModelCall) -> InspectedRequest:
    """The exact request of `call` (rebuilt and checked against its SHA-256), block by block."""
    body = selectors.model_call_request(call=call)
    system_value = body.get("system", [])
    system = (
        [InspectedBlock("text", system_value, False)]
        if isinstance(system_value, str)
        else [_inspected_block(b) for b in system_value]
    )
    tools = [
        InspectedTool(
            name=str(t.get("name", "")),
            definition_json=_json({k: v for k, v in t.items() if k != "cache_control"}),
            cached="cache_control" in t,
        )
        for t in body.get("tools", [])
    ]
    all_messages = body.get("messages", [])
    first_shown = max(0, len(all_messages) - INSPECTOR_MESSAGES_SHOWN)
    messages = [
        InspectedMessage(
            index=index,
            role=str(m.get("role")),
            blocks=[
                _inspected_block(b)
                for b in (m["content"] if isinstance(m.get("content"), list) else [m.get("content")])
            ],
        )
        for index, m in enumerate(all_messages)
        if index >= first_shown
    ]
    breakpoints = (
        sum(b.cached for b in system)
        + sum(t.cached for t in tools)
        + sum(
            1
            for m in all_messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and "cache_control" in b
        )
    )
    siblings = ModelCall.objects.filter(session_id=call.session_id)
    previous = (
        siblings.filter(Q(started_at__lt=call.started_at) | Q(started_at=call.started_at, pk__lt=call.pk))
        .order_by("-started_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    following = (
        siblings.filter(Q(started_at__gt=call.started_at) | Q(started_at=call.started_at, pk__gt=call.pk))
        .order_by("started_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )
    return InspectedRequest(
        call=call,
        body=body,
        verified=selectors.model_call_request_verified(call=call),
        system=system,
        tools=tools,
        messages=messages,
        hidden_messages=first_shown,
        breakpoints=breakpoints,
        stable_prefix_ratio=(call.stable_prefix_bytes / call.request_bytes) if call.request_bytes else 0.0,
        previous_id=previous,
        next_id=following,
    )


# ---------------------------------------------------------------------------
# The archive stepper
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchiveStep:
    archive: Archive
    count: int
    position: int  # 1-based among the session's archives
    previous_epoch: int | None
    next_epoch: int | None
    notepad: memory_selectors.NotepadState  # as it was when the archive was made


def archive_step(*, session_id: uuid.UUID, epoch: Any = None) -> ArchiveStep | None:
    """The archive of `epoch` (the latest without one) with its neighbours; None when the session
    has not compacted yet. Raises `NotFound` for an epoch it has no archive of."""
    archives = Archive.objects.filter(session_id=session_id)
    if epoch in (None, ""):
        archive = archives.order_by("-epoch").first()
        if archive is None:
            return None
    else:
        try:
            archive = archives.get(epoch=int(epoch))
        except (Archive.DoesNotExist, TypeError, ValueError) as exc:
            raise NotFound from exc
    epochs = list(archives.order_by("epoch").values_list("epoch", flat=True))
    index = epochs.index(archive.epoch)
    return ArchiveStep(
        archive=archive,
        count=len(epochs),
        position=index + 1,
        previous_epoch=epochs[index - 1] if index > 0 else None,
        next_epoch=epochs[index + 1] if index + 1 < len(epochs) else None,
        notepad=memory_selectors.notepad_as_of(session_id=session_id, moment=archive.created_at),
    )


@dataclass(frozen=True)
class ArchivedPage:
    items: list[transcript.TranscriptItem]
    next_after: int | None  # load the page after this position next (None: the epoch's end)


def archive_messages_page(
    *, archive: Archive, after_position: int | None = None, limit: int = ARCHIVE_MESSAGES_PAGE_SIZE
) -> ArchivedPage:
    """The archived messages of `archive`'s epoch, `limit` at a time, in order."""
    messages_qs = Message.objects.filter(session_id=archive.session_id, epoch=archive.epoch)
    if after_position is not None:
        messages_qs = messages_qs.filter(position__gt=after_position)
    messages = list(
        messages_qs.only("position", "epoch", "role", "content", "metadata").order_by("position")[: limit + 1]
    )
    has_more = len(messages) > limit
    messages = messages[:limit]
    names = dict(
        ToolCall.objects.filter(
            session_id=archive.session_id, tool_use_id__in=transcript.tool_use_ids(messages)
        ).values_list("tool_use_id", "name")
    )
    summaries = {
        str(pk): summary
        for pk, summary in Archive.objects.filter(
            session_id=archive.session_id, pk__in=transcript.archive_ids(messages)
        ).values_list("pk", "summary")
    }
    return ArchivedPage(
        items=transcript.items_from_messages(messages, tool_names=names, summaries=summaries),
        next_after=messages[-1].position if has_more and messages else None,
    )


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SpaceView:
    name: str
    value: str | list[str]
    used: int  # characters, or items for refs
    limit: int
    version: int
    revisions: list[ScratchpadRevision]  # the latest, newest first

    @property
    def text(self) -> str:
        """The value as the editor shows it (refs: one a line)."""
        return "\n".join(self.value) if isinstance(self.value, list) else self.value

    @property
    def unit(self) -> str:
        return "items" if self.name == ScratchpadSpace.REFS else "chars"


def scratchpad_spaces(*, session: AgentSession, only: str | None = None) -> list[SpaceView]:
    """The three spaces (or `only` one) with their limits and latest revisions."""
    view = scratchpad_get(session_id=session.pk)
    limits = ScratchpadLimits.from_settings(session.settings)
    limit_of: dict[str, int] = {
        ScratchpadSpace.NOTES: limits.notes_max_chars,
        ScratchpadSpace.PLAN: limits.plan_max_chars,
        ScratchpadSpace.REFS: limits.refs_max_items,
    }
    names = [only] if only else list(ScratchpadSpace.values)
    revisions = ScratchpadRevision.objects.filter(session_id=session.pk, space__in=names).order_by("-version")
    spaces = []
    for name in names:
        value: str | list[str] = getattr(view, name)
        spaces.append(
            SpaceView(
                name=name,
                value=value,
                used=len(value),
                limit=limit_of[name],
                version=getattr(view, f"{name}_version"),
                revisions=list(revisions.filter(space=name)[:SCRATCHPAD_REVISIONS_SHOWN]),
            )
        )
    return spaces


# ---------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------
def observations_of(*, session_id: uuid.UUID, limit: int = OBSERVATIONS_SHOWN) -> list[Observation]:
    return list(
        Observation.objects.filter(session_id=session_id)
        .defer("summary", "metadata")
        .order_by("-created_at")[:limit]
    )


def observation_get_for_operator(*, session_id: uuid.UUID, observation_id: Any) -> Observation:
    if not isinstance(observation_id, str):
        raise NotFound
    observation = Observation.objects.filter(pk=observation_id, session_id=session_id).first()
    if observation is None:
        raise NotFound
    return observation
