"""Budgets over the agent websocket (PROTOCOL.md v1.2): `settings.budget` at `session.create`, a
turn stopped with `turn.completed` `stop_reason: "budget_reached"`, and `session.update` raising
it so that the next message goes on; a bad value is an error that changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import AgentSession, ModelCall
from tests.conftest import chat
from tests.sessions_app.agent_ws.test_session_update import reply_to, stored

pytestmark = pytest.mark.django_db(transaction=True)


async def calls_of(session_id: str) -> int:
    return await sync_to_async(ModelCall.objects.filter(session_id=uuid.UUID(session_id)).count)()


async def test_a_budget_stops_the_turn_and_session_update_raising_it_lets_the_next_go_on(
    connect: Any,
) -> None:
    client = await connect()
    session = await client.create(settings={"budget": {"max_input_tokens": 10}})
    assert session["settings"]["budget"] == {
        "max_cost_usd": None,
        "max_input_tokens": 10,
        "max_output_tokens": None,
    }
    frames = await chat(client, "echo one")
    assert frames[-1]["stop_reason"] == "budget_reached"
    assert not [f for f in frames if f["type"] == "assistant.message"]
    assert await calls_of(session["id"]) == 0
    reply = await reply_to(
        client, {"type": "session.update", "settings": {"budget": {"max_input_tokens": 500_000}}}
    )
    assert reply["type"] == "session.state"
    assert reply["session"]["settings"]["budget"]["max_input_tokens"] == 500_000
    frames = await chat(client, "echo two")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert [f for f in frames if f["type"] == "assistant.message"]
    assert await calls_of(session["id"]) == 1
    await client.close()


@pytest.mark.parametrize(
    "limits",
    [{"max_cost_usd": -0.5}, {"max_input_tokens": "many"}, {"max_output_tokens": 2.5}, {"unknown": 1}],
)
async def test_a_bad_budget_is_an_error_and_changes_nothing(connect: Any, limits: dict) -> None:
    client = await connect()
    session = await client.create(settings={"budget": {"max_input_tokens": 10}})
    before: AgentSession = await stored(session["id"])
    reply = await reply_to(
        client, {"type": "session.update", "title": "changed", "settings": {"budget": limits}}
    )
    assert (reply["type"], reply["code"]) == ("error", "invalid_settings")
    assert "settings.budget" in reply["message"]
    after = await stored(session["id"])
    assert (after.title, after.settings, after.last_seq) == (before.title, before.settings, before.last_seq)
    await client.close()


async def test_a_bad_budget_at_create_is_refused(connect: Any) -> None:
    client = await connect()
    await client.send({"type": "session.create", "settings": {"budget": {"max_cost_usd": "ten"}}})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_settings")
    await client.close()
