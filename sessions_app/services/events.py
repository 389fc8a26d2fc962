"""Session events: each written with the session's next `seq`, announced after commit."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F

from sessions_app.announce import announce_on_commit
from sessions_app.models import AgentSession, SessionEvent


def event_emit(*, session_id: uuid.UUID, type: str, payload: dict[str, Any]) -> SessionEvent:
    """Write one event with the session's next `seq`; it is announced when the transaction commits."""
    return events_emit(session_id=session_id, events=[(type, payload)])[0]


def events_emit(*, session_id: uuid.UUID, events: list[tuple[str, dict[str, Any]]]) -> list[SessionEvent]:
    """Write `events` (type, payload) with the session's next consecutive `seq`s, in that order:
    one increment of `last_seq` and one insert for all of them, however many. Each is announced
    when the transaction commits."""
    if not events:
        return []
    with transaction.atomic():
        AgentSession.objects.filter(pk=session_id).update(last_seq=F("last_seq") + len(events))
        last = AgentSession.objects.filter(pk=session_id).values_list("last_seq", flat=True).get()
        rows = [
            SessionEvent(session_id=session_id, seq=last - len(events) + 1 + i, type=t, payload=p)
            for i, (t, p) in enumerate(events)
        ]
        SessionEvent.objects.bulk_create(rows)
        for row in rows:
            announce_on_commit(row.as_frame())
    return rows
