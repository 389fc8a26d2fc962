"""Where authored tools are offered: sessions of an agent, with the sandbox on and
`knowledge.tool_authoring`; an operator's disabled tool nowhere. Elsewhere define_tool is refused
and the agent's tools are not in the request."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.agent_models import Agent
from tests.memory_app.authored_tools.support import (
    COUNT_CODE,
    agent_create,
    call_words,
    define_words,
    offered,
    result,
    turn,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def with_a_tool(client: Any) -> None:
    await agent_create(client)
    await client.create(agent="helper")
    assert result(await turn(client, define_words("word_count", COUNT_CODE)))["is_error"] is False


async def test_not_offered_without_an_agent(connect: Any) -> None:
    client = await connect()
    await with_a_tool(client)
    plain = await client.create()
    assert not {"define_tool", "remove_tool", "word_count"} & set(offered(plain))
    frames = await turn(client, define_words("other", COUNT_CODE))
    answer = [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"]
    assert answer.startswith("I cannot define tools here")


@pytest.mark.parametrize(
    "session_settings",
    [{"sandbox": {"enabled": False}}, {"knowledge": {"tool_authoring": False}}],
    ids=["sandbox-off", "tool-authoring-off"],
)
async def test_not_offered_where_the_session_switches_it_off(connect: Any, session_settings: dict) -> None:
    client = await connect()
    await with_a_tool(client)
    session = await client.create(agent="helper", settings=session_settings)
    assert not {"define_tool", "remove_tool", "word_count"} & set(offered(session))
    frames = await turn(client, call_words("word_count", {"text": "a"}))
    assert not [f for f in frames if f["type"] == "tool.call"]


async def test_not_offered_where_the_server_has_no_sandbox(connect: Any, settings: Any) -> None:
    client = await connect()
    await with_a_tool(client)
    settings.PALIMPSEST_SANDBOX = "off"
    session = await client.create(agent="helper")
    assert not {"define_tool", "word_count"} & set(offered(session))


async def test_an_operators_disabled_tool_is_offered_nowhere_and_cannot_be_called(connect: Any) -> None:
    client = await connect()
    await with_a_tool(client)
    agent = await sync_to_async(Agent.objects.get)(name="helper")
    await sync_to_async(services.agent_tool_enable)(
        agent_id=agent.pk, name="word_count", enabled=False, author="operator:ann"
    )
    session = await client.create(agent="helper")
    assert "word_count" not in offered(session)
    await client.send({"type": "agent.get", "name": "helper"})
    state = await client.until("agent.state")
    assert state[-1]["agent"]["tools"] == []
    await sync_to_async(services.agent_tool_enable)(
        agent_id=agent.pk, name="word_count", enabled=True, author="operator:ann"
    )
    frames = await turn(client, call_words("word_count", {"text": "a b"}))
    assert result(frames)["content"] == '{"words": 2}'
