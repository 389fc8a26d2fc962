"""Storing new sessions and setting their status."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction

from sessions_app.models import AgentSession, AgentToken
from sessions_app.services.events import event_emit


def session_insert(
    *,
    owner: AgentToken | None,
    model: str,
    context_window: int,
    title: str = "",
    system_prompt: str = "",
    compact_threshold: float,
    settings: dict[str, Any],
    client_tools: list[dict],
) -> AgentSession:
    """Store a new session from values already checked (`engine.sessions.session_create` checks
    them against the features' settings and the model's window)."""
    return AgentSession.objects.create(
        owner=owner,
        title=title,
        model=model,
        system_prompt=system_prompt,
        context_window=context_window,
        compact_threshold=compact_threshold,
        settings=settings,
        client_tools=client_tools,
    )


def default_model() -> str:
    if django_settings.PALIMPSEST_PROVIDER == "scripted":
        return "scripted"
    return django_settings.PALIMPSEST_DEFAULT_MODEL


def session_status_set(*, session_id: uuid.UUID, status: str) -> None:
    """Set the session's status and announce it (`session.status`, an addition to PROTOCOL.md:
    turn events already tell running/idle/error; this tells what no other event does, e.g.
    `compacting`)."""
    with transaction.atomic():
        AgentSession.objects.filter(pk=session_id).update(status=status)
        event_emit(session_id=session_id, type="session.status", payload={"status": status})
