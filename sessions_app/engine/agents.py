"""Agents as the engine sees them (DESIGN.md, "Agents"): creating, changing and deleting one
(its name, model and settings checked as a session's are) and ending a session. What a session
of an agent is shown is `agent_context`'s."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

from django.db import transaction

from sessions_app import services
from sessions_app.common.db import db
from sessions_app.engine.features import features
from sessions_app.engine.runner import turn_notify, turn_repair_if_dead
from sessions_app.engine.sessions import session_delete
from sessions_app.models import Agent, AgentSession
from sessions_app.validation import SpecError, session_create_clean, session_fields_clean

# DESIGN.md: 1-64 characters, lowercase letters, digits, `-` and `_`.
AGENT_NAME_RE = re.compile(r"[a-z0-9_-]{1,64}")
# How long `session_end` waits for a cancelled turn to stop before it ends the rest.
END_WAIT_SECONDS = 30.0
END_POLL_SECONDS = 0.05


def agent_validate(*, name: Any, model: Any = None, system_prompt: Any = None, settings: Any = None) -> dict:
    """The agent's fields checked (`SpecError` for a bad one): the name by DESIGN.md's rule, the
    model, instructions and settings as a session's are."""
    if not isinstance(name, str) or not AGENT_NAME_RE.fullmatch(name):
        raise SpecError(
            "invalid_value",
            "agent name must be 1-64 characters: lowercase letters, digits, '-' and '_'",
        )
    return session_create_clean(
        model=model,
        system_prompt=system_prompt,
        settings=settings,
        settings_schema=features().settings_schema,
    )


def agent_create(
    *,
    owner_name: str,
    name: Any,
    system_prompt: Any = None,
    model: Any = None,
    settings: Any = None,
    author: str,
) -> Agent:
    """Check and create an agent (runs in a DB thread). `SpecError` (`invalid_value`, or the
    session fields' own codes for the model and settings) for a bad value, `services.AgentExists`
    when the owner has one of that name."""
    fields = agent_validate(name=name, model=model, system_prompt=system_prompt, settings=settings)
    return services.agent_insert(
        owner_name=owner_name,
        name=name,
        instructions=fields.get("system_prompt", ""),
        model=fields.get("model") or "",
        # As given (checked above): its sessions get the features' defaults of their own day,
        # with these over them (`engine.sessions.agent_session_settings`).
        settings=dict(settings) if isinstance(settings, dict) else {},
        author=author,
    )


def agent_update(
    *, agent_id: int, system_prompt: Any = None, model: Any = None, settings: Any = None, author: str
) -> Agent:
    """Change the agent's instructions (a new version by `author`; the same text makes none), the
    model or the settings its sessions start from (given keys laid over its own; in place, as
    `services.agent_defaults_set` says); None leaves a part as it is. Runs in a DB thread. All or
    nothing: `SpecError` for a bad value (checked as at create) and nothing changed. A running
    session of the agent sees new instructions as `knowledge.refresh` says.
    `Agent.DoesNotExist` when there is no such agent."""
    fields = session_fields_clean(model=model, system_prompt=system_prompt)
    if settings is not None and not isinstance(settings, dict):
        raise SpecError("invalid_settings", "settings must be an object")
    with transaction.atomic():
        if model is not None or settings is not None:
            services.agent_defaults_set(
                agent_id=agent_id,
                model=fields.get("model"),
                settings=settings,
                schema=features().settings_schema,
            )
        if system_prompt is not None:
            services.agent_instructions_set(
                agent_id=agent_id, instructions=fields["system_prompt"], author=author
            )
        return Agent.objects.get(pk=agent_id)


def agent_delete(*, agent_id: int) -> list[uuid.UUID]:
    """Delete the agent with every session of it, ended or not (each with its sub-sessions, as
    `engine.sessions.session_delete` deletes one), then the agent with its versions, skills,
    state and tools, in one transaction (runs in a DB thread). Returns the deleted sessions'
    ids. Refused with `services.TurnInProgress` while a turn runs in any of those sessions:
    nothing is deleted then. `Agent.DoesNotExist` when there is no such agent."""
    deleted: list[uuid.UUID] = []
    with transaction.atomic():
        Agent.objects.select_for_update().get(pk=agent_id)
        # Shallowest first: a root's deletion takes its sub-sessions, which are not deleted twice.
        sessions = AgentSession.objects.filter(agent_id=agent_id).order_by("depth", "created_at")
        for session_id in list(sessions.values_list("pk", flat=True)):
            if session_id not in deleted:
                deleted += session_delete(session_id=session_id)
        services.agent_delete(agent_id=agent_id)
    return deleted


# ---------------------------------------------------------------------------
# Ending a session
# ---------------------------------------------------------------------------
async def session_end(*, session_id: uuid.UUID, reason: str) -> list[uuid.UUID]:
    """End the session and its sub-sessions (DESIGN.md: "A running turn is cancelled first, and
    its children are ended with it"): from now on none takes a message; a running turn is asked
    to stop and waited for (at most END_WAIT_SECONDS); then each is `ended`, children first, with
    `session.ended`. Returns the sessions ended. `AgentSession.DoesNotExist` when there is no
    such session."""
    ids = await db(services.session_end_request)(session_id=session_id)
    for sid in ids:
        turn_notify(sid)
    deadline = asyncio.get_running_loop().time() + END_WAIT_SECONDS
    while True:
        running = await db(_running)(ids)
        for sid in running:
            await turn_repair_if_dead(session_id=sid)
        if not running or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(END_POLL_SECONDS)
    return await db(services.session_end_finish)(session_ids=ids, reason=reason)


def _running(ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return list(
        AgentSession.objects.filter(pk__in=ids, current_turn_id__isnull=False).values_list("pk", flat=True)
    )
