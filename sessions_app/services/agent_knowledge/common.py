"""What the agent knowledge services share: the agent's row under lock, and `agent.updated`."""

from __future__ import annotations

import uuid
from typing import Any

from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.agent_models import Agent
from sessions_app.services.events import event_emit

AGENT_UPDATED = "agent.updated"


def agent_lock(agent_id: int, *fields: str) -> Agent:
    """The agent's row, locked until the caller's transaction ends; `AgentKnowledgeError` when
    it no longer exists."""
    row = Agent.objects.select_for_update().only("id", "name", *fields).filter(pk=agent_id).first()
    if row is None:
        raise AgentKnowledgeError("This agent no longer exists, so nothing was changed.")
    return row


def agent_updated_emit(
    *,
    session_id: uuid.UUID | None,
    agent: Agent,
    part: str,
    name: str,
    version: int | None,
    author: str,
) -> None:
    """`agent.updated` on the session whose call made the change (PROTOCOL.md v1.2); nothing for
    a change no session made (an operator's, a client's, an import)."""
    if session_id is None:
        return
    payload: dict[str, Any] = {
        "agent": agent.name,
        "part": part,
        "name": name,
        "version": version,
        "author": author,
    }
    event_emit(session_id=session_id, type=AGENT_UPDATED, payload=payload)
