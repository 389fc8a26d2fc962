"""Creating, changing and deleting sessions.

Creating a session as PROTOCOL.md says: every field checked (the settings against the features'
rules), the model's context window resolved, then stored (`services.session_insert`). The agent
websocket, the dashboard, the admin and the HTTP API create sessions through here, and delete
them through `session_delete` (the session with its sub-sessions and every feature's part), and
change them through `session_update` (PROTOCOL.md v1.2's `session.update`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction

from sessions_app import selectors, services
from sessions_app.budgets import session_spend
from sessions_app.common.db import db
from sessions_app.engine.budget_check import price_here
from sessions_app.engine.features import features
from sessions_app.engine.providers import (
    context_window_resolve,
    context_window_resolve_sync,
    default_model,
    model_unserved,
    provider_name_for_model,
)
from sessions_app.models import Agent, AgentSession, AgentToken
from sessions_app.validation import SpecError, session_create_clean, session_fields_clean, settings_clean


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
    reserved_tool_names: Iterable[str] | None = None,
    agent: Agent | None = None,
) -> AgentSession:
    """Validate and create a session (runs in a DB thread). Raises `validation.SpecError` naming
    the bad field. `reserved_tool_names`: names a client tool may not take (the server tools';
    by default every feature's). A session of `agent` (PROTOCOL.md v1.2) takes the agent's model
    and settings where it names none (its own settings are merged over the agent's), and its
    `system_prompt` comes after the agent's instructions (the engine shows both: `agent_context`).

    A session that names no `context_window` gets its model's (`context_window_resolve`: the
    built-in table, else the Models API, else 128,000); one that names no `compact_threshold` gets
    the server's, `PALIMPSEST_COMPACT_THRESHOLD` (0.8 unless set). Async callers resolve it first with
    `session_context_window_resolve`, so that no database thread waits on the Models API.

    A model that no provider configured here answers (`providers.model_unserved`: its provider
    has no key and no base URL) is an `invalid_value`, and nothing is stored."""
    feature_set = features()
    fields = session_create_clean(
        title=title,
        model=model,
        system_prompt=system_prompt,
        context_window=context_window,
        compact_threshold=compact_threshold,
        tools=tools,
        settings=settings,
        settings_schema=feature_set.settings_schema,
        reserved_tool_names=feature_set.tool_names() if reserved_tool_names is None else reserved_tool_names,
    )
    model_name = fields.get("model") or (agent.model if agent is not None else "") or default_model()
    problem = model_unserved(model_name)
    if problem is not None:
        # Not answered by another provider instead (DESIGN.md): the client picks a served model.
        raise SpecError("invalid_value", problem)
    session_settings = fields["settings"] if agent is None else agent_session_settings(agent, settings)
    return services.session_insert(
        owner=owner,
        title=fields.get("title", ""),
        model=model_name,
        system_prompt=fields.get("system_prompt", ""),
        context_window=fields.get("context_window") or context_window_resolve_sync(model_name),
        compact_threshold=fields.get("compact_threshold", django_settings.PALIMPSEST_COMPACT_THRESHOLD),
        settings=session_settings,
        client_tools=fields["tools"],
        agent_id=agent.pk if agent is not None else None,
    )


def agent_session_settings(agent: Agent, settings: Any) -> dict[str, Any]:
    """A new session's settings: the features' defaults, then the agent's, then the session's
    own (`SpecError` for a bad one)."""
    schema = features().settings_schema
    base = settings_clean(agent.settings or {}, schema=schema)
    return settings_clean(settings if settings is not None else {}, schema=schema, base=base)


def session_update(
    *,
    session_id: uuid.UUID,
    title: Any = None,
    context_window: Any = None,
    compact_threshold: Any = None,
    settings: Any = None,
) -> AgentSession:
    """Change a session's title, window, threshold or settings (runs in a DB thread), checked by
    the rules of `session.create`; None leaves a field as it is. Returns the session as stored.

    All or nothing: every field is checked before anything is written, and a bad one raises
    `validation.SpecError` naming it, with nothing changed. The given `settings` keys are merged
    into the session's current settings (as `session.create` merges them into the defaults).
    The change is stored and announced by `services.session_settings_update` (the event
    `session.updated`); the engine reads the session's row for every model call, so a new window
    or threshold applies from the next one, a running turn's included.
    `AgentSession.DoesNotExist` when there is no such session."""
    changes: dict[str, Any] = session_fields_clean(
        title=title, context_window=context_window, compact_threshold=compact_threshold
    )
    # The row is locked from the read of its settings to the write of their merge: two updates
    # at once would otherwise each merge into the same old settings, and one would be lost.
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if settings is not None:
            changes["settings"] = settings_clean(
                settings, schema=features().settings_schema, base=session.settings
            )
        return services.session_settings_update(session_id=session.pk, changes=changes)


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


def session_delete(*, session_id: uuid.UUID) -> list[uuid.UUID]:
    """Delete a session with its whole subtree of sub-sessions (runs in a DB thread). The
    dashboard's Delete and the admin's delete both come here. Returns the deleted ids.

    Refused with `services.TurnInProgress` while a turn runs in any session of the subtree
    (PROTOCOL.md's `DELETE /api/v1/sessions/{id}`: 409 `turn_in_progress`): the operator cancels
    it first. In the same transaction as the rows' deletion, each feature's
    `FeatureLifecycle.delete` runs for every deleted session (children first), for what the
    foreign keys' cascade would not remove; a hook that raises deletes nothing. Nothing is
    announced: a client attached to the session gets `session_not_found` on its next frame.
    `AgentSession.DoesNotExist` when there is no such session."""
    hooks = [lifecycle.delete for _, lifecycle in features().lifecycles if lifecycle.delete is not None]

    def features_delete(ids: list[uuid.UUID]) -> None:
        for deleted in reversed(ids):
            for hook in hooks:
                hook(deleted)

    return services.session_tree_delete(session_id=session_id, before_delete=features_delete)


async def session_state_when_ready(session: AgentSession) -> dict[str, Any]:
    """`session_state` (`session.created`, `session.state`), read again once the tool sources
    that were not ready when it was first read are (an MCP server's first start, waited for on
    the event loop, in no database thread: `Feature.tool_source_ready`), so that its
    `server_tools` already names their tools."""
    state = await db(session_state)(session)
    current = features()
    if await current.tool_sources_ready(current.snapshot(session)):
        state = await db(session_state)(session)
    return state


def session_state(session: AgentSession) -> dict[str, Any]:
    """The session as clients see it (`session.created`, `session.state`): its row, the server
    tools its model is offered now, the provider that answers it, and `spend`: what it and the
    sessions below it spent, as its budget counts it (docs/budgets.md)."""
    state = selectors.session_public_state(
        session=session,
        server_tools=features().offered_names(session),
        provider=provider_name_for_model(session.model),
    )
    spend = session_spend(session=session, price_of=price_here)
    state["spend"] = {
        "input_tokens": spend.input_tokens,
        "output_tokens": spend.output_tokens,
        "cost_usd": round(spend.cost_usd, 6) if spend.cost_usd is not None else None,
    }
    return state
