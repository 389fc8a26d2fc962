"""PROTOCOL.md v1.2's `session.update` frame (issue 30 item 9c): the session's state back, a bad
value an error that changes nothing, another owner's session refused, and the next model call
using the new window and threshold."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import AgentSession
from tests.sessions_app.test_window_too_small import refusal

pytestmark = pytest.mark.django_db(transaction=True)


async def stored(session_id: str) -> AgentSession:
    return await sync_to_async(AgentSession.objects.get)(pk=session_id)


async def reply_to(client: Any, frame: dict) -> dict:
    """The answer to `frame` (sent with a request_id), past any event frames."""
    await client.send({**frame, "request_id": "u"})
    while True:
        reply = await client.recv()
        if reply.get("request_id") == "u":
            return reply


async def test_an_update_answers_the_sessions_state_with_the_new_values(connect: Any) -> None:
    client = await connect()
    session = await client.create(title="old", settings={"max_steps_per_turn": 7})
    reply = await reply_to(
        client,
        {
            "type": "session.update",
            "title": "new",
            "context_window": 50_000,
            "compact_threshold": 0.5,
            "settings": {"notepad": {"position": "message"}},
        },
    )
    assert reply["type"] == "session.state"
    state = reply["session"]
    assert state["id"] == session["id"]
    assert (state["title"], state["context_window"], state["compact_threshold"]) == ("new", 50_000, 0.5)
    assert state["settings"]["notepad"] == {
        "enabled": True,
        "position": "message",
        "history_max_chars": 2_000_000,
    }
    assert state["settings"]["max_steps_per_turn"] == 7  # merged into the session's, not the defaults
    assert state["server_tools"] == session["server_tools"]
    row = await stored(session["id"])
    assert (row.title, row.context_window, row.compact_threshold) == ("new", 50_000, 0.5)
    await client.close()


async def test_the_attached_client_sees_the_session_updated_event(connect: Any) -> None:
    client = await connect()
    await client.create(title="old")
    await client.send({"type": "session.update", "title": "new"})
    frames = await client.until("session.updated")
    assert frames[-1]["title"] == "new" and "seq" in frames[-1]
    await client.close()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"context_window": 10}, "invalid_value"),
        ({"compact_threshold": 0}, "invalid_value"),
        ({"settings": {"notepad": {"position": "nowhere"}}}, "invalid_settings"),
        ({"settings": {"no_such_setting": True}}, "invalid_settings"),
        ({"context_window": "big"}, "invalid_frame"),
    ],
)
async def test_a_bad_value_is_an_error_and_changes_nothing(connect: Any, fields: dict, code: str) -> None:
    client = await connect()
    session = await client.create(title="kept")
    before = await stored(session["id"])
    reply = await reply_to(client, {"type": "session.update", "title": "changed", **fields})
    assert (reply["type"], reply["code"]) == ("error", code)
    after = await stored(session["id"])
    assert (after.title, after.context_window, after.compact_threshold, after.settings, after.last_seq) == (
        before.title,
        before.context_window,
        before.compact_threshold,
        before.settings,
        before.last_seq,
    )
    await client.close()


async def test_another_owners_session_is_session_not_found(connect: Any) -> None:
    owner = await connect()
    theirs = await owner.create(title="theirs")
    other = await connect()
    await other.create(title="mine")
    reply = await reply_to(other, {"type": "session.update", "session_id": theirs["id"], "title": "taken"})
    assert (reply["type"], reply["code"]) == ("error", "session_not_found")
    assert (await stored(theirs["id"])).title == "theirs"
    await owner.close()
    await other.close()


async def test_a_named_session_of_ones_own_is_updated_without_attaching(
    connect: Any, make_token: Any
) -> None:
    token = await make_token()
    first = await connect(token)
    session = await first.create(title="first")
    second = await connect(token)
    reply = await reply_to(
        second, {"type": "session.update", "session_id": session["id"], "title": "renamed"}
    )
    assert reply["type"] == "session.state"
    assert reply["session"]["title"] == "renamed"
    await first.close()
    await second.close()


async def test_without_a_session_id_it_needs_an_attached_session(connect: Any) -> None:
    client = await connect()
    reply = await reply_to(client, {"type": "session.update", "title": "x"})
    assert (reply["type"], reply["code"]) == ("error", "not_attached")
    await client.close()


async def test_the_next_model_call_uses_the_new_window_and_threshold(connect: Any) -> None:
    client = await connect()
    await client.create(title="window")
    await client.send({"type": "user.message", "content": "hello"})
    assert (await client.until("turn.completed", timeout=10))[-1]["stop_reason"] == "end_turn"
    reply = await reply_to(
        client, {"type": "session.update", "context_window": 2000, "compact_threshold": 0.5}
    )
    assert reply["type"] == "session.state"
    refused = await refusal(client)
    assert refused["code"] == "context_window_too_small"
    assert "2,000" in refused["message"] or "2000" in refused["message"]
    reply = await reply_to(client, {"type": "session.update", "context_window": 200_000})
    assert reply["type"] == "session.state"
    await client.send({"type": "user.message", "content": "hello again"})
    assert (await client.until("turn.completed", timeout=10))[-1]["stop_reason"] == "end_turn"
    await client.close()
