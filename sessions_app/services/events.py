"""Session events: each written with the session's next `seq`, announced after commit."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F

from sessions_app.announce import announce_on_commit
from sessions_app.models import AgentSession, SessionEvent


def _seq_next(session_id: uuid.UUID) -> int:
    AgentSession.objects.filter(pk=session_id).update(last_seq=F("last_seq") + 1)
    return AgentSession.objects.filter(pk=session_id).values_list("last_seq", flat=True).get()


def event_emit(*, session_id: uuid.UUID, type: str, payload: dict[str, Any]) -> SessionEvent:
    """Write one event with the session's next `seq`; it is announced when the transaction commits."""
    with transaction.atomic():
        seq = _seq_next(session_id)
        event = SessionEvent.objects.create(session_id=session_id, seq=seq, type=type, payload=payload)
        announce_on_commit(event.as_frame())
    return event
