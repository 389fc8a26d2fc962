"""Creating sessions (validated as PROTOCOL.md says) and setting their status."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction

from sessions_app.engine.providers import context_window_resolve, context_window_resolve_sync
from sessions_app.models import AgentSession, AgentToken
from sessions_app.services.events import event_emit
from sessions_app.validation import client_tools_clean, session_fields_clean, settings_clean


def session_create(
    *,
    owner: AgentToken | None,
    title: Any = None,
    model: Any = None,
    system_prompt: Any = None,
    context_window: Any = None,
    compact_threshold: Any = None,
    tools: Any = None,
    settings: Any = None,
    reserved_tool_names: Iterable[str] = (),
) -> AgentSession:
    """Validate and create a session. Raises `validation.SpecError` naming the bad field.

    A session that names no `context_window` gets its model's (`context_window_resolve`: the
    built-in table, else the Models API, else 128,000); one that names no `compact_threshold`
    gets the server's, `PALIMPSEST_COMPACT_THRESHOLD` (0.8 unless set). Async callers resolve it first with
    `session_context_window_resolve`, so that no database thread waits on the Models API."""
    fields = session_fields_clean(
        title=title,
        model=model,
        system_prompt=system_prompt,
        context_window=context_window,
        compact_threshold=compact_threshold,
    )
    clean_settings = settings_clean(settings)
    clean_tools = client_tools_clean(tools if tools is not None else [], reserved_names=reserved_tool_names)
    model_name = fields.get("model") or default_model()
    return AgentSession.objects.create(
        owner=owner,
        title=fields.get("title", ""),
        model=model_name,
        system_prompt=fields.get("system_prompt", ""),
        context_window=fields.get("context_window") or context_window_resolve_sync(model_name),
        compact_threshold=fields.get("compact_threshold", django_settings.PALIMPSEST_COMPACT_THRESHOLD),
        settings=clean_settings,
        client_tools=clean_tools,
    )


async def session_context_window_resolve(*, model: Any, context_window: Any) -> Any:
    """The `context_window` to hand `session_create` for a new session of `model` (None: the
    default model): the one asked for, else the model's own (`context_window_resolve`). Values
    are passed on unchecked: `session_create` validates them."""
    if context_window is not None:
        return context_window
    name = model or default_model()
    if not isinstance(name, str):
        return None
    return await context_window_resolve(name)


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
