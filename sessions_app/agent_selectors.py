"""Reads of agents (DESIGN.md, "Agents"; PROTOCOL.md v1.2's `agent` state)."""

from __future__ import annotations

from typing import Any

from sessions_app.models import Agent, AgentSkill, AgentTool


class AgentNotFound(Exception):
    """No agent of that name for that owner (another owner's agent is not found either)."""


def agent_get(*, owner_name: str, name: str) -> Agent:
    """The owner's agent `name`; `AgentNotFound` otherwise."""
    agent = Agent.objects.filter(owner_name=owner_name, name=name).first()
    if agent is None:
        raise AgentNotFound(f"no agent named {name!r}")
    return agent


def agent_public_state(*, agent: Agent) -> dict[str, Any]:
    """The agent as clients see it (PROTOCOL.md v1.2: `agent` in agent.created / agent.state)."""
    skills = AgentSkill.objects.filter(agent=agent).order_by("name").values("name", "description", "version")
    return {
        "name": agent.name,
        "instructions": agent.instructions,
        "learned": agent.learned,
        "model": agent.model or None,
        "settings": agent.settings,
        "skills": list(skills),
        # Its authored tools that its sessions are offered (an operator's disabled ones are not).
        "tools": list(
            AgentTool.objects.filter(agent=agent, enabled=True)
            .order_by("name")
            .values("name", "description", "version")
        ),
        "versions": {"instructions": agent.instructions_version, "learned": agent.learned_version},
        "created_at": agent.created_at.isoformat(),
    }


def agent_knowledge(*, agent_id: int) -> tuple[Agent, list[tuple[str, str]]]:
    """What a session of the agent is shown of its knowledge now: the agent row and its skills'
    (name, description), sorted by name."""
    agent = Agent.objects.get(pk=agent_id)
    skills = list(
        AgentSkill.objects.filter(agent_id=agent_id).order_by("name").values_list("name", "description")
    )
    return agent, skills
