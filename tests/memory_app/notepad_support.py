"""Helpers shared by the notepad tests."""

from __future__ import annotations

from typing import Any

from memory_app.models import NotepadRevision
from sessions_app import services
from sessions_app.models import AgentSession, SessionEvent


def session_make(**settings: Any) -> AgentSession:
    return services.session_create(owner=None, settings=settings or None)


def notepad_row(session: AgentSession) -> tuple[str | None, int]:
    session.refresh_from_db(fields=["notepad", "notepad_version"])
    return session.notepad, session.notepad_version


def notepad_events(session: AgentSession) -> list[dict]:
    return [
        e.payload
        for e in SessionEvent.objects.filter(session=session, type="notepad.updated").order_by("seq")
    ]


def revisions(session: AgentSession) -> list[tuple[int, str, str, str]]:
    return [
        (r.version, r.author, r.operation, r.content)
        for r in NotepadRevision.objects.filter(session=session).order_by("version")
    ]
