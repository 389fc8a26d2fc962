"""Helpers shared by the knowledge tools' tests: a session of an agent over the agent websocket."""

from __future__ import annotations

import uuid
from typing import Any

from sessions_app.agent_models import Agent
from sessions_app.common.db import db
from sessions_app.models import AgentSession
from tests.memory_app.notepad_support import turn

KNOWLEDGE_TOOLS = ["edit_system_prompt", "read_skill", "write_skill", "delete_skill", "agent_state"]


def _agent_join(session_id: str, name: str) -> Agent:
    agent, _ = Agent.objects.get_or_create(owner_name="client", name=name)
    AgentSession.objects.filter(pk=uuid.UUID(session_id)).update(agent=agent)
    return agent


async def agent_session(
    client: Any, *, agent: str | None = "helper", **fields: Any
) -> tuple[dict, Agent | None]:
    """A new session over `client`, joined to the agent `agent` (made when missing; None: no
    agent) with the ORM, until `session.create` takes `agent`."""
    session = await client.create(**fields)
    if agent is None:
        return session, None
    return session, await db(_agent_join)(session["id"], agent)


async def agent_reload(agent: Agent) -> Agent:
    return await db(Agent.objects.get)(pk=agent.pk)


async def one_call(
    client: Any, fake: Any, name: str, tool_input: dict, *, content: str = "go"
) -> tuple[dict, list]:
    """One turn in which the model calls `name` once then says "done": the request after the call
    and the turn's frames."""
    from tests.fake_anthropic import text, tool_use

    before = len(fake.requests)
    fake.enqueue(tool_use(name, tool_input), text("done"))
    frames = await turn(client, content)
    assert len(fake.requests) == before + 2
    return fake.requests[-1].body, frames


def offered(body: dict) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]
