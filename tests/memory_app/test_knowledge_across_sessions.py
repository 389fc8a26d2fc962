"""Through the protocol (`agent.create`, `session.create` with `agent`) and the fake Messages API:
what one session of an agent keeps reaches the next, and a running session's system prompt moves
to the edit exactly when the tool's result said it would."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.knowledge import prompts
from sessions_app.engine.prompts import LEARNED_EMPTY_HINT, LEARNED_HEADING
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.notepad_support import system_texts, turn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_scratchpad", "without_tasks"),
]

EMPTY = f"{LEARNED_HEADING}\n{LEARNED_EMPTY_HINT}\n"


def system(body: dict) -> str:
    """The request's system prompt as one text (the agent's sections share a block)."""
    return "\n\n".join(system_texts(body)) + "\n"


async def agent_session(client: Any, **fields: Any) -> dict:
    await client.send({"type": "agent.create", "name": "helper", **fields})
    assert (await client.recv())["type"] == "agent.created"
    return await client.create(agent="helper")


async def test_what_one_session_learns_the_next_session_starts_with(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    first = await agent_session(client)
    fake_anthropic.enqueue(
        tool_use("edit_system_prompt", {"operation": "append", "content": "The user is Ann.\n"}),
        tool_use("write_skill", {"name": "greet", "description": "Greet Ann by name.", "content": "Say hi."}),
        tool_use("agent_state", {"action": "set", "key": "visits", "value": 1}),
        text("done"),
    )
    await turn(client)
    await client.send({"type": "session.end", "session_id": first["id"]})
    await client.until("session.ended")
    await client.create(agent="helper")
    fake_anthropic.enqueue(tool_use("agent_state", {"action": "get", "key": "visits"}), text("done"))
    await turn(client)
    request = fake_anthropic.requests[-2].body
    assert f"{LEARNED_HEADING}\nThe user is Ann.\n" in system(request)
    assert "## Skills\n- greet: Greet Ann by name.\n" in system(request)
    result = fake_anthropic.requests[-1].body["messages"][-1]["content"][0]
    assert result["content"] == '{"key": "visits", "value": 1, "version": 1}'


async def test_an_edit_reaches_the_running_sessions_prompt_at_its_next_compaction_by_default(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client)
    fake_anthropic.enqueue(
        tool_use("edit_system_prompt", {"operation": "append", "content": "X\n"}), text("ok")
    )
    await turn(client)
    # The request after the call: the cached prefix is unchanged, as the result said.
    assert EMPTY in system(fake_anthropic.requests[-1].body)
    result = fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"]
    assert result[1]["text"] == prompts.TAKES_EFFECT_AT_COMPACTION


async def test_with_refresh_immediate_the_next_call_shows_the_edit(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, settings={"knowledge": {"refresh": "immediate"}})
    fake_anthropic.enqueue(
        tool_use("edit_system_prompt", {"operation": "append", "content": "X\n"}), text("ok")
    )
    await turn(client)
    assert f"{LEARNED_HEADING}\nX\n" in system(fake_anthropic.requests[-1].body)
    result = fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"]
    assert result[1]["text"] == prompts.TAKES_EFFECT_NOW
