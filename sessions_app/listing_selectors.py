"""Paged reads of a client's sessions and agents and of an agent's versions, skills and state (the
HTTP API's lists, PROTOCOL.md "HTTP API v1"). Each page is keyset-paged: it starts after the last
item of the page before (`after`), so an item inserted meanwhile never shifts a page or is seen
twice, and a page asks for one item more than it returns to know whether another follows."""

from __future__ import annotations

import datetime
import uuid
from typing import Any, NamedTuple

from django.db.models import Q

from sessions_app.agent_knowledge_rules import STATE_MAX_KEYS
from sessions_app.agent_models import Agent, AgentPart, AgentSkill, AgentStateEntry, AgentVersion
from sessions_app.models import AgentSession


class Page(NamedTuple):
    """A page of items, and whether more follow its last."""

    items: list[Any]
    more: bool


def _page(rows: list[Any], limit: int) -> Page:
    return Page(rows[:limit], len(rows) > limit)


def sessions_of_client(
    *,
    owner_name: str,
    limit: int,
    after: tuple[datetime.datetime, uuid.UUID] | None = None,
    agent: str | None = None,
    status: str | None = None,
    title_contains: str | None = None,
) -> Page:
    """The client's sessions (those of its tokens of that name), newest first (creation time,
    then id), after `after` (the last page's last (created_at, id)); filtered by its agent's
    name, its status and a text its title contains (case-insensitive)."""
    sessions = AgentSession.objects.filter(owner__name=owner_name)
    if agent is not None:
        sessions = sessions.filter(agent__name=agent, agent__owner_name=owner_name)
    if status is not None:
        sessions = sessions.filter(status=status)
    if title_contains:
        sessions = sessions.filter(title__icontains=title_contains)
    if after is not None:
        created_at, pk = after
        sessions = sessions.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=pk))
    return _page(list(sessions.order_by("-created_at", "-pk")[: limit + 1]), limit)


def agents_of_client(*, owner_name: str, limit: int, after: str | None = None) -> Page:
    """The client's agents by name, after the name `after`."""
    agents = Agent.objects.filter(owner_name=owner_name)
    if after is not None:
        agents = agents.filter(name__gt=after)
    return _page(list(agents.order_by("name")[: limit + 1]), limit)


def agent_text_versions(*, agent_id: int, part: str, limit: int, before: int | None = None) -> Page:
    """The versions of the agent's instructions or learned text (`part`), newest first, before
    the version number `before`."""
    versions = AgentVersion.objects.filter(agent_id=agent_id, part=part, name="")
    if before is not None:
        versions = versions.filter(version__lt=before)
    return _page(list(versions.order_by("-version")[: limit + 1]), limit)


TEXT_PARTS = (AgentPart.INSTRUCTIONS, AgentPart.LEARNED)


def agent_skills_page(*, agent_id: int, limit: int, after: str | None = None) -> Page:
    """The agent's skills by name (name, description, version: no body), after the name `after`."""
    skills = AgentSkill.objects.filter(agent_id=agent_id)
    if after is not None:
        skills = skills.filter(name__gt=after)
    rows = skills.order_by("name").values("name", "description", "version")[: limit + 1]
    return _page(list(rows), limit)


def agent_state_page(*, agent_id: int, limit: int, prefix: str = "", after: str | None = None) -> Page:
    """The agent's state entries whose key starts with `prefix` (case-sensitive), by key in code
    point order, after the key `after`. Sorted here, as `agent_state_keys` sorts: SQLite's LIKE
    ignores case and PostgreSQL sorts by its collation, and an agent holds at most
    STATE_MAX_KEYS keys."""
    keys = AgentStateEntry.objects.filter(agent_id=agent_id).values_list("key", flat=True)[:STATE_MAX_KEYS]
    chosen = sorted(k for k in keys if k.startswith(prefix) and (after is None or k > after))[: limit + 1]
    entries = {
        e.key: e
        for e in AgentStateEntry.objects.filter(agent_id=agent_id, key__in=chosen).only(
            "key", "value", "version"
        )
    }
    return _page([entries[k] for k in chosen if k in entries], limit)
