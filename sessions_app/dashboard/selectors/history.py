"""What a session said: the transcript, its archived epochs (the archive stepper), the text a
running step has streamed so far, and the event timeline.

The transcript and an archived epoch are pages of the same query (`_items_page`): stored
messages as transcript items, with the names of their tool calls and the summaries that start
their epochs. Three queries a page, whatever the session's length (a fourth when the page holds
calls of an agent's authored tools: their progress notes).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from sessions_app.dashboard import transcript
from sessions_app.dashboard.selectors.common import NotFound
from sessions_app.dashboard.selectors.subsessions import transcript_link_children
from sessions_app.engine.features import features
from sessions_app.message_content import messages_with_content
from sessions_app.models import AgentSession, Archive, Message, SessionEvent, ToolCall

TRANSCRIPT_PAGE_SIZE = 60
ARCHIVE_MESSAGES_PAGE_SIZE = 50
TIMELINE_SIZE = 60  # events other than deltas
TIMELINE_MAX_DELTAS = 2000
DELTA = "assistant.delta"
# A running step's text so far is the run of deltas at the end of the event log (bounded).
STREAM_TAIL_MAX_EVENTS = 5000


def _items_page(
    messages_qs: QuerySet[Message], *, session_id: uuid.UUID, limit: int, backwards: bool
) -> tuple[list[transcript.TranscriptItem], int | None, list[Message]]:
    """`limit` messages of `messages_qs` as transcript items, in order, the position the next
    page continues from (None: there is none), and the messages themselves. `backwards` reads
    from the end (the next page is older: continue before the position given), else from the
    start (continue after it)."""
    ordered = messages_with_content(
        messages_qs.only("position", "epoch", "role", "metadata", "created_at")
    ).order_by("-position" if backwards else "position")
    messages = list(ordered[: limit + 1])
    has_more = len(messages) > limit
    messages = messages[:limit]
    if backwards:
        messages.reverse()
    names = dict(
        ToolCall.objects.filter(
            session_id=session_id, tool_use_id__in=transcript.tool_use_ids(messages)
        ).values_list("tool_use_id", "name")
    )
    summaries = {
        str(archive.pk): archive
        for archive in Archive.objects.filter(session_id=session_id, pk__in=transcript.archive_ids(messages))
    }
    items = transcript.items_from_messages(messages, tool_names=names, summaries=summaries)
    items = transcript_call_notes(session_id=session_id, items=items)
    if not (has_more and messages):
        return items, None, messages
    return items, (messages[0] if backwards else messages[-1]).position, messages


def transcript_call_notes(
    *, session_id: uuid.UUID, items: list[transcript.TranscriptItem]
) -> list[transcript.TranscriptItem]:
    """`items` with the notepad notes each call made while it ran (an authored tool's progress
    notes: the `notepad.updated` events naming the call). Only calls of tools the features do not
    define are looked up: no other tool's edits name their call."""
    static = features().tool_names()
    calls = {use.id for item in items for use in item.tool_uses if use.name not in static}
    if not calls:
        return items
    notes: dict[str, list[str | None]] = {}
    events = SessionEvent.objects.filter(
        session_id=session_id, type=transcript.NOTEPAD_UPDATED, payload__tool_use_id__in=sorted(calls)
    ).order_by("seq")
    for payload in events.values_list("payload", flat=True).iterator():
        found = transcript.call_note_of({"type": transcript.NOTEPAD_UPDATED, **payload})
        if found is not None:
            notes.setdefault(found[0], []).append(found[1])
    if not notes:
        return items
    return [
        dataclasses.replace(
            item,
            tool_uses=[
                dataclasses.replace(use, notes=tuple(notes.get(use.id, ()))) for use in item.tool_uses
            ],
        )
        if any(use.id in notes for use in item.tool_uses)
        else item
        for item in items
    ]


# A turn's end as the transcript shows it live (`transcript.items_from_event`): its `error` and a
# `turn.completed` other than the model's own end.
TURN_END_EVENTS = ("error", "turn.completed")


def _turn_ends(
    *,
    session_id: uuid.UUID,
    since: datetime | None,
    until: datetime | None,
    until_seq: int | None,
) -> list[tuple[datetime, list[transcript.TranscriptItem]]]:
    """The stored events that end turns (errors, turns ended other than by the model) written in
    [since, until) and up to `until_seq`, as (when, transcript items), oldest first. They are
    the transcript's as much as its messages are: a reload shows what was shown live."""
    events = SessionEvent.objects.filter(session_id=session_id, type__in=TURN_END_EVENTS)
    if since is not None:
        events = events.filter(created_at__gte=since)
    if until is not None:
        events = events.filter(created_at__lt=until)
    if until_seq is not None:
        events = events.filter(seq__lte=until_seq)
    ends = []
    for event in events.order_by("seq"):
        items = transcript.items_from_event(event.as_frame())
        if items:
            ends.append((event.created_at, items))
    return ends


def _with_turn_ends(
    items: list[transcript.TranscriptItem],
    messages: list[Message],
    ends: list[tuple[datetime, list[transcript.TranscriptItem]]],
) -> list[transcript.TranscriptItem]:
    """`items` (of `messages`, in order) with each turn end after the last message written before it."""
    if not ends:
        return items
    written = {m.position: m.created_at for m in messages}
    merged: list[transcript.TranscriptItem] = []
    pending = list(ends)
    for item in items:
        when = written.get(item.position) if item.position is not None else None
        while pending and when is not None and pending[0][0] < when:
            merged += pending.pop(0)[1]
        merged.append(item)
    for _, end_items in pending:
        merged += end_items
    return merged


# ---------------------------------------------------------------------------
# The transcript
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TranscriptPage:
    items: list[transcript.TranscriptItem]
    # Load the page before this position next (None: this page starts the session).
    older_before: int | None


def transcript_page(
    *,
    session_id: uuid.UUID,
    before_position: int | None = None,
    limit: int = TRANSCRIPT_PAGE_SIZE,
    until_seq: int | None = None,
) -> TranscriptPage:
    """The `limit` messages before `before_position` (the latest ones without it), every epoch,
    as transcript items in order, with the errors and abnormal ends of turns among them (events
    after `until_seq` are left out: the page's websocket replays them)."""
    messages_qs = Message.objects.filter(session_id=session_id)
    until = None
    if before_position is not None:
        messages_qs = messages_qs.filter(position__lt=before_position)
        # The newer page shows what was written from its first message on.
        until = (
            Message.objects.filter(session_id=session_id, position__gte=before_position)
            .order_by("position")
            .values_list("created_at", flat=True)
            .first()
        )
    items, older_before, messages = _items_page(
        messages_qs, session_id=session_id, limit=limit, backwards=True
    )
    # The older page shows what was written before this page's first message.
    since = messages[0].created_at if older_before is not None and messages else None
    ends = _turn_ends(session_id=session_id, since=since, until=until, until_seq=until_seq)
    items = _with_turn_ends(items, messages, ends)
    items = transcript_link_children(session_id=session_id, items=items)
    return TranscriptPage(items=items, older_before=older_before)


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
    """The latest `limit` events other than deltas, and the deltas among them (at most
    TIMELINE_MAX_DELTAS, the newest), as frames, newest first. Deltas would otherwise fill the
    timeline: `timeline_rows` folds each run of them into one row."""
    events = SessionEvent.objects.filter(session_id=session_id)
    others = list(events.exclude(type=DELTA).order_by("-seq")[:limit])
    deltas = events.filter(type=DELTA)
    if len(others) == limit:
        deltas = deltas.filter(seq__gt=others[-1].seq)
    merged = sorted([*others, *deltas.order_by("-seq")[:TIMELINE_MAX_DELTAS]], key=lambda e: -e.seq)
    return [event.as_frame() for event in merged]


@dataclass(frozen=True)
class TimelineRow:
    """One row of the timeline: an event, or a run of consecutive deltas (newest first)."""

    frame: dict[str, Any] | None = None
    deltas: tuple[dict[str, Any], ...] = ()

    @property
    def deltas_text(self) -> str:
        return "".join(str(frame.get("text", "")) for frame in reversed(self.deltas))


def timeline_rows(frames: list[dict[str, Any]]) -> list[TimelineRow]:
    """Frames (newest first) as rows, each run of two or more deltas folded into one."""
    rows: list[TimelineRow] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if len(run) == 1:
            rows.append(TimelineRow(frame=run[0]))
        elif run:
            rows.append(TimelineRow(deltas=tuple(run)))
        run.clear()

    for frame in frames:
        if frame.get("type") == DELTA:
            run.append(frame)
            continue
        flush()
        rows.append(TimelineRow(frame=frame))
    flush()
    return rows


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
    items, next_after, _ = _items_page(
        messages_qs, session_id=archive.session_id, limit=limit, backwards=False
    )
    return ArchivedPage(items=items, next_after=next_after)
