"""Sub-sessions over the agent websocket (PROTOCOL.md v1.1): children's events on the parent's
connection, a child's client tools answered there, reattaching to a tree, attaching to a child,
and cancelling a parent's turn."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from sessions_app.engine.tool_dispatch import CANCELLED_TOOL_RESULT
from sessions_app.models import AgentSession, Turn
from sessions_app.services import INTERRUPTED_TOOL_RESULT
from tests.conftest import alist
from tests.fake_anthropic import text, tool_use
from tests.memory_app.subsessions_support import (
    SETTINGS,
    Router,
    assert_every_request_valid,
    child_on,
    last_results,
    of,
    report,
    requests_matching,
    root,
    spawn,
    until_of,
)

pytestmark = pytest.mark.django_db(transaction=True)
LOOKUP = {
    "name": "lookup",
    "description": "Look something up on the client.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


def child_asks_the_client(task: str = "Find the owner.") -> Router:
    return (
        Router()
        .on(child_on(task), tool_use("lookup", {"q": "owner"}, text="Asking."), report("the owner is Ada"))
        .on(root, spawn(task), text("Ada owns it."))
    )


async def start(connect, fake, router: Router, token: str | None = None) -> tuple:
    fake.default_reply = router
    client = await connect(token)
    # The server's default model: the one of the provider the test runs against.
    session = await client.create(model=settings.PALIMPSEST_DEFAULT_MODEL, tools=[LOOKUP], settings=SETTINGS)
    await client.send({"type": "user.message", "content": "Who owns it?"})
    return client, session


async def child_tool_call(client, session: dict) -> tuple[list[dict], dict]:
    """Frames until the child's client tool call; the call."""
    frames = []
    while True:
        frame = await client.recv(10)
        frames.append(frame)
        if frame["type"] == "tool.call" and frame["session_id"] != session["id"]:
            return frames, frame


async def test_session_state_says_where_a_session_sits_in_its_tree(connect, strict_anthropic):
    client, session = await start(connect, strict_anthropic, child_asks_the_client())
    assert (session["parent_session_id"], session["root_session_id"], session["depth"]) == (
        None,
        session["id"],
        0,
    )
    frames, call = await child_tool_call(client, session)
    child_id = call["session_id"]
    other = await connect()
    await other.send({"type": "session.attach", "session_id": child_id})
    # Another client's token cannot see the child.
    assert (await other.recv())["code"] == "session_not_found"
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "Ada"})
    await until_of(client, "turn.completed", session["id"])
    await client.close()
    await other.close()


async def test_childs_client_tool_call_is_answered_on_the_parents_connection(connect, model_servers):
    strict_anthropic = model_servers(strict=True).fake
    client, session = await start(connect, strict_anthropic, child_asks_the_client())
    frames, call = await child_tool_call(client, session)
    child_id = call["session_id"]
    assert (call["name"], call["executor"], call["input"]) == ("lookup", "client", {"q": "owner"})
    (spawned,) = of(frames, session["id"], "session.spawned")
    assert spawned["child_session_id"] == child_id
    # The child's frames carry its own seq, from 1.
    assert [f["seq"] for f in of(frames, child_id)] == list(range(1, len(of(frames, child_id)) + 1))
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "Ada"})
    rest = await until_of(client, "turn.completed", session["id"])
    assert of(rest, child_id, "tool.result")[0]["content"] == "Ada"
    child_second = requests_matching(strict_anthropic, child_on("Find the owner."))[-1]
    assert last_results(child_second)[0]["content"] == "Ada"
    outcome = json.loads(last_results(requests_matching(strict_anthropic, root)[-1])[0]["content"])
    assert (outcome["status"], outcome["result"]) == ("reported", "the owner is Ada")
    assert rest[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


async def test_reattaching_to_the_root_with_since_seqs_replays_the_childs_missed_events(
    connect, make_token, strict_anthropic
):
    token = await make_token()
    client, session = await start(connect, strict_anthropic, child_asks_the_client(), token)
    frames = await until_of(client, "session.spawned", session["id"])
    child_id = frames[-1]["child_session_id"]
    root_seen = frames[-1]["seq"]
    child_seen = max([f["seq"] for f in of(frames, child_id)], default=0)
    await client.close()

    again = await connect(token)
    await again.send(
        {
            "type": "session.attach",
            "session_id": session["id"],
            "since_seq": root_seen,
            "since_seqs": {child_id: child_seen},
            "request_id": "r",
        }
    )
    replayed: list[dict] = []
    call = None
    while call is None or not any(f["type"] == "session.attached" for f in replayed):
        frame = await again.recv(10)
        replayed.append(frame)
        if frame["type"] == "tool.call" and frame["session_id"] == child_id:
            call = frame
    attached = next(f for f in replayed if f["type"] == "session.attached")
    assert attached["request_id"] == "r" and attached["session_id"] == session["id"]
    (listed,) = attached["descendants"]
    assert (listed["session_id"], listed["parent_session_id"], listed["depth"]) == (
        child_id,
        session["id"],
        1,
    )
    # Every child event after what the client had seen, in order, none twice, the call included.
    child_seqs = [f["seq"] for f in of(replayed, child_id)]
    assert child_seqs == list(range(child_seen + 1, child_seen + 1 + len(child_seqs)))
    assert all(f["seq"] > root_seen for f in of(replayed, session["id"]) if "seq" in f)
    await again.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "Ada"})
    rest = await until_of(again, "turn.completed", session["id"])
    assert rest[-1]["stop_reason"] == "end_turn"
    await again.close()


async def test_a_client_may_attach_to_a_child_and_answer_its_call_there(
    connect, make_token, strict_anthropic
):
    token = await make_token()
    client, session = await start(connect, strict_anthropic, child_asks_the_client(), token)
    _, call = await child_tool_call(client, session)
    child_id = call["session_id"]
    direct = await connect(token)
    await direct.send({"type": "session.attach", "session_id": child_id})
    replay = await direct.until("session.attached")
    assert any(f["type"] == "tool.call" and f["tool_use_id"] == call["tool_use_id"] for f in replay)
    assert {f["session_id"] for f in replay[:-1]} == {child_id}
    await direct.send({"type": "session.get"})
    state = (await direct.until("session.state"))[-1]["session"]
    assert (state["parent_session_id"], state["root_session_id"], state["depth"]) == (
        session["id"],
        session["id"],
        1,
    )
    await direct.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "Ada"})
    done = await until_of(client, "turn.completed", session["id"])
    assert done[-1]["stop_reason"] == "end_turn"
    await client.close()
    await direct.close()


async def test_unknown_tool_use_id_is_still_an_error(connect, strict_anthropic):
    client, session = await start(connect, strict_anthropic, child_asks_the_client())
    _, call = await child_tool_call(client, session)
    await client.send({"type": "tool.result", "tool_use_id": "toolu_nobody", "content": "x"})
    error = await client.recv()
    assert error["type"] == "error" and error["code"] == "unknown_tool_use_id"
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "Ada"})
    await until_of(client, "turn.completed", session["id"])
    await client.close()


async def test_cancelling_the_parents_turn_cancels_its_children_and_their_pending_calls(
    connect, strict_anthropic
):
    # A grandchild waits for the client; cancelling the root ends all three turns.
    router = (
        Router()
        .on(child_on("Deeper."), tool_use("lookup", {"q": "x"}))
        .on(child_on("Go down."), spawn("Deeper."))
        .on(root, spawn("Go down."), text("After the cancel."))
    )
    client, session = await start(connect, strict_anthropic, router)
    frames = []
    call = None
    while call is None:
        frame = await client.recv(10)
        frames.append(frame)
        if frame["type"] == "tool.call" and frame["name"] == "lookup":
            call = frame
    grandchild_id = call["session_id"]
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    await client.send({"type": "turn.cancel"})
    rest = await until_of(client, "turn.completed", session["id"])
    frames += rest
    assert rest[-1]["stop_reason"] == "cancelled"
    assert of(frames, child_id, "turn.completed")[0]["stop_reason"] == "cancelled"
    assert of(frames, grandchild_id, "turn.completed")[0]["stop_reason"] == "cancelled"
    (cancelled_call,) = of(frames, grandchild_id, "tool.result")
    assert (cancelled_call["content"], cancelled_call["is_error"]) == (CANCELLED_TOOL_RESULT, True)
    # The children ended before their parents did.
    order = [f for f in frames if f["type"] == "turn.completed"]
    assert [f["session_id"] for f in order] == [grandchild_id, child_id, session["id"]]
    turns = await alist(Turn.objects.values_list("stop_reason", flat=True))
    assert sorted(turns) == ["cancelled"] * 3
    statuses = await alist(AgentSession.objects.values_list("status", flat=True))
    assert set(statuses) == {"idle"}

    # The parent's history stays valid: its next turn goes to the model and ends normally.
    await client.send({"type": "user.message", "content": "Carry on."})
    after = await until_of(client, "turn.completed", session["id"])
    assert after[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


async def test_a_crashed_tree_is_repaired_like_any_turn(connect, make_token, model_servers):
    """A process that dies mid-delegation leaves the parent's spawn call and the child's client
    call unanswered; once their leases run out, each session's next turn repairs its history."""
    strict_anthropic = model_servers(strict=True).fake
    token = await make_token()
    client, session = await start(connect, strict_anthropic, child_asks_the_client(), token)
    _, call = await child_tool_call(client, session)
    child_id = uuid.UUID(call["session_id"])
    await client.close()
    # The "crash": every running turn of this process stops at once, writing nothing more.
    from sessions_app.engine import runner

    for task in list(runner._running):
        task.cancel()
    await runner.turns_wait_idle(timeout=5)
    strict_anthropic.default_reply = Router().on(lambda body: True, text("Recovered."), text("Recovered."))
    # Their leases run out (the crashed turns still hold them).
    assert await sync_to_async(AgentSession.objects.filter(current_turn_id__isnull=False).count)() == 2
    await sync_to_async(AgentSession.objects.update)(lease_expires_at=timezone.now())

    again = await connect(token)
    for session_id in (session["id"], str(child_id)):
        await again.send({"type": "session.attach", "session_id": session_id})
        await again.until("session.attached")
        await again.send({"type": "user.message", "content": "Are you there?"})
        done = await until_of(again, "turn.completed", session_id)
        assert done[-1]["stop_reason"] == "end_turn"
        # The unanswered call (the parent's spawn, the child's lookup) got the interrupted result.
        repaired = strict_anthropic.requests[-1].body["messages"][-1]["content"][0]
        assert (repaired["type"], repaired["content"]) == ("tool_result", INTERRUPTED_TOOL_RESULT)
    assert_every_request_valid(strict_anthropic)
    await again.close()


@pytest.mark.parametrize(
    "since_seqs",
    [["not", "an", "object"], {"not-a-session-id": 1}, {str(uuid.uuid4()): -1}, {str(uuid.uuid4()): True}],
)
async def test_malformed_since_seqs_is_an_invalid_frame(connect, since_seqs):
    client = await connect()
    session = await client.create()
    await client.send({"type": "session.attach", "session_id": session["id"], "since_seqs": since_seqs})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_frame")
    await client.close()
