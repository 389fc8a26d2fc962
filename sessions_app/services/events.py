"""Session events: each written with the session's next `seq`, announced after commit."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from sessions_app.announce import announce_on_commit
from sessions_app.fastpath.counters import session_counter_add
from sessions_app.fastpath.rows import values_insert
from sessions_app.models import SessionEvent


def event_emit(*, session_id: uuid.UUID, type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Write one event with the session's next `seq`; it is announced when the transaction
    commits. Returns its frame (`SessionEvent.as_frame`)."""
    return events_emit(session_id=session_id, events=[(type, payload)])[0]


def events_emit(*, session_id: uuid.UUID, events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Write `events` (type, payload) with the session's next consecutive `seq`s, in that order:
    one increment of `last_seq` and one insert for all of them, however many. They are announced
    together when the transaction commits. Returns their frames.

    Inside a caller's transaction it opens no savepoint (two more statements per write on the
    step path): nothing catches its failure to go on, the whole transaction rolls back."""
    if not events:
        return []
    with transaction.atomic(savepoint=False):
        last = session_counter_add(session_id, "last_seq", len(events))
        return events_insert(session_id=session_id, last_seq=last, events=events)


EVENT_FIELDS = ("session_id", "seq", "type", "payload", "created_at")


def events_insert(
    *, session_id: uuid.UUID, last_seq: int, events: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Insert `events` whose seqs the caller allocated in its own update of the session row
    (`counters.session_update`, adding `len(events)` to `last_seq`, whose new value is
    `last_seq`), and announce them when the transaction commits. Returns their frames
    (`SessionEvent.as_frame`). One write's events share its time."""
    now = timezone.now()
    first = last_seq - len(events) + 1
    rows = [(session_id, first + i, kind, payload, now) for i, (kind, payload) in enumerate(events)]
    values_insert(SessionEvent, EVENT_FIELDS, rows)
    sid, ts = str(session_id), now.isoformat()
    frames = [
        {"type": kind, "session_id": sid, "seq": seq, "ts": ts, **payload}
        for _, seq, kind, payload, _ in rows
    ]
    announce_on_commit(*frames)
    return frames
