"""Agents with knowledge, for the dashboard's tests. The learned text, skills and state are
written by the agent's sessions through the knowledge feature's services; these helpers write
the same rows (the agent's text and version, a version row with its author) directly, so the
pages can be tested on their own. Also used by the browser test's seed script."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from sessions_app.engine import agents as engine_agents
from sessions_app.models import Agent, AgentPart, AgentSkill, AgentStateEntry, AgentVersion

SESSION_AUTHOR = "agent:00000000-0000-0000-0000-000000000001"


def agent_new(
    name: str = "auditor", *, owner_name: str = "", instructions: str = "You audit.", **fields: Any
) -> Agent:
    return engine_agents.agent_create(
        owner_name=owner_name, name=name, system_prompt=instructions, author="client:test", **fields
    )


def learned_write(agent: Agent, text: str, *, author: str = SESSION_AUTHOR) -> int:
    """The learned text replaced as its next version (as `edit_system_prompt` leaves it)."""
    with transaction.atomic():
        row = Agent.objects.select_for_update().get(pk=agent.pk)
        row.learned, row.learned_version = text, row.learned_version + 1
        row.updated_at = timezone.now()
        row.save(update_fields=["learned", "learned_version", "updated_at"])
        AgentVersion.objects.create(
            agent=row, part=AgentPart.LEARNED, version=row.learned_version, content=text, author=author
        )
    agent.refresh_from_db()
    return agent.learned_version


def skill_write(
    agent: Agent, name: str, description: str, content: str, *, author: str = SESSION_AUTHOR
) -> int:
    """The skill created or replaced as its next version (as `write_skill` leaves it)."""
    with transaction.atomic():
        last = (
            AgentVersion.objects.filter(agent=agent, part=AgentPart.SKILL, name=name)
            .order_by("-version")
            .first()
        )
        version = (last.version if last else 0) + 1
        AgentSkill.objects.update_or_create(
            agent=agent,
            name=name,
            defaults={
                "description": description,
                "content": content,
                "version": version,
                "updated_at": timezone.now(),
            },
        )
        AgentVersion.objects.create(
            agent=agent,
            part=AgentPart.SKILL,
            name=name,
            version=version,
            content=content,
            extra={"description": description},
            author=author,
        )
    return version


def state_set(agent: Agent, key: str, value: Any, *, author: str = SESSION_AUTHOR) -> int:
    entry = AgentStateEntry.objects.filter(agent=agent, key=key).first()
    version = (entry.version if entry else 0) + 1
    AgentStateEntry.objects.update_or_create(
        agent=agent, key=key, defaults={"value": value, "version": version, "author": author}
    )
    return version
