"""Helpers shared by the agent knowledge tests: agents and their sessions made with the ORM."""

from __future__ import annotations

from typing import Any

from sessions_app.agent_models import Agent, AgentVersion
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, SessionEvent


def agent_make(name: str = "helper", owner_name: str = "client", **fields: Any) -> Agent:
    return Agent.objects.create(name=name, owner_name=owner_name, **fields)


def agent_session_make(agent: Agent | None, **settings: Any) -> AgentSession:
    session = engine_sessions.session_create(owner=None, settings=settings or None)
    if agent is not None:
        session.agent = agent
        session.save(update_fields=["agent"])
    return session


def agent_events(session: AgentSession) -> list[dict]:
    return [
        e.payload for e in SessionEvent.objects.filter(session=session, type="agent.updated").order_by("seq")
    ]


def versions(agent: Agent, part: str, name: str = "") -> list[tuple[int, str, bool, str]]:
    return [
        (v.version, v.content, v.deleted, v.author)
        for v in AgentVersion.objects.filter(agent=agent, part=part, name=name).order_by("version")
    ]
