"""The agent websocket, frame by frame, against PROTOCOL.md (scripted model)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, AgentToken, Message, SessionEvent
from tests.conftest import alist
from tests.sessions_app.conftest import CLIENT_TOOL

pytestmark = pytest.mark.django_db(transaction=True)


# -- authentication ------------------------------------------------------------------------
async def _connect_raw(headers=None, path="/ws/agent/"):
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await communicator.connect()
    return communicator, connected


async def test_missing_token_closes_with_4401(transactional_db):
    communicator, _ = await _connect_raw()
    assert await communicator.receive_output(timeout=2) == {"type": "websocket.close", "code": 4401}


async def test_wrong_token_closes_with_4401(transactional_db):
    communicator, _ = await _connect_raw([(b"authorization", b"Bearer pal_not-a-token")])
    assert (await communicator.receive_output(timeout=2))["code"] == 4401


async def test_revoked_token_closes_with_4401(make_token):
    raw = await make_token()
    token = await sync_to_async(AgentToken.objects.get)()
    await sync_to_async(services.agent_token_revoke)(token=token)
    communicator, _ = await _connect_raw([(b"authorization", f"Bearer {raw}".encode())])
    assert (await communicator.receive_output(timeout=2))["code"] == 4401


async def test_token_in_query_string_is_accepted(make_token, connect):
    raw = await make_token()
    client = await connect(headers=[], path=f"/ws/agent/?token={raw}")
    assert (await client.create())["id"]
    await client.close()


async def test_browser_from_foreign_origin_is_refused(make_token):
    raw = await make_token()
    communicator = WebsocketCommunicator(
        application, f"/ws/agent/?token={raw}", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await communicator.connect()
    assert not connected


# -- malformed frames ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", "invalid_json"),
        ("[1, 2]", "invalid_frame"),
        ('{"content": "no type"}', "invalid_frame"),
        ('{"type": 7}', "invalid_frame"),
        ('{"type": "session.explode"}', "unknown_type"),
        ('{"type": "session.attach"}', "invalid_frame"),
        ('{"type": "session.attach", "session_id": 5}', "invalid_frame"),
        ('{"type": "session.create", "context_window": "big"}', "invalid_frame"),
        ('{"type": "session.create", "context_window": true}', "invalid_frame"),
        ('{"type": "tool.result", "tool_use_id": "x"}', "invalid_frame"),
        ('{"type": "tool.result", "tool_use_id": "x", "content": 3}', "invalid_frame"),
        ('{"type": "user.message"}', "invalid_frame"),
    ],
)
async def test_bad_frame_gets_error_and_connection_stays_open(connect, frame, code):
    client = await connect()
    await client.send(frame)
    reply = await client.recv()
    assert reply["type"] == "error"
    assert reply["code"] == code
    assert reply["message"]
    assert (await client.create())["id"]  # still usable
    await client.close()


async def test_binary_frame_gets_error(connect):
    client = await connect()
    await client.ws.send_to(bytes_data=b"\x00\x01")
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_frame")
    await client.close()


async def test_frame_over_limit_gets_frame_too_large(connect, settings):
    settings.PALIMPSEST_MAX_FRAME_BYTES = 1000
    client = await connect()
    await client.send({"type": "session.create", "title": "x" * 2000})
    reply = await client.recv()
    assert reply["code"] == "frame_too_large"
    assert await sync_to_async(AgentSession.objects.count)() == 0
    await client.close()


async def test_error_echoes_request_id(connect):
    client = await connect()
    await client.send({"type": "session.get", "request_id": "r-1"})
    reply = await client.recv()
    assert reply == {
        "type": "error",
        "code": "not_attached",
        "message": reply["message"],
        "request_id": "r-1",
    }
    await client.close()


@pytest.mark.parametrize("frame_type", ["user.message", "tool.result", "turn.cancel", "session.get"])
async def test_session_frames_before_attach_get_not_attached(connect, frame_type):
    client = await connect()
    await client.send({"type": frame_type, "content": "x", "tool_use_id": "t"})
    assert (await client.recv())["code"] == "not_attached"
    await client.close()


# -- session.create ------------------------------------------------------------------------
async def test_session_create_returns_public_state_with_default_settings(connect):
    client = await connect()
    await client.send({"type": "session.create", "title": "demo", "request_id": 7})
    reply = await client.recv()
    assert reply["type"] == "session.created"
    assert reply["request_id"] == 7
    session = reply["session"]
    assert session["title"] == "demo"
    assert session["model"] == "scripted"
    assert session["context_window"] == 200_000
    assert session["compact_threshold"] == 0.8
    assert session["settings"]["notepad"] == {
        "enabled": True,
        "position": "epoch",
        "history_max_chars": 2_000_000,
    }
    assert session["settings"]["offload"] == {
        "enabled": True,
        "threshold_bytes": 4096,
        "ttl_seconds": 3600,
        "scope": "turn",
    }
    assert session["settings"]["max_steps_per_turn"] == 25
    assert session["status"] == "idle"
    await client.close()


async def test_session_create_without_a_threshold_gets_the_servers_default(connect, settings):
    settings.PALIMPSEST_COMPACT_THRESHOLD = 0.65
    client = await connect()
    session = await client.create()
    assert session["compact_threshold"] == 0.65
    await client.close()


async def test_unknown_model_gets_default_context_window(connect):
    client = await connect()
    session = await client.create(model="some-future-model")
    assert session["context_window"] == 128_000
    await client.close()


async def test_session_create_merges_partial_settings(connect):
    client = await connect()
    session = await client.create(settings={"scratchpad": {"notes_max_chars": 100}, "max_steps_per_turn": 3})
    assert session["settings"]["scratchpad"]["notes_max_chars"] == 100
    assert session["settings"]["scratchpad"]["plan_max_chars"] == 2000
    assert session["settings"]["max_steps_per_turn"] == 3
    await client.close()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"settings": {"notepad": {"position": "footer"}}}, "invalid_settings"),
        ({"settings": {"notepad": {"enabled": "yes"}}}, "invalid_settings"),
        ({"settings": {"offload": {"scope": "galaxy"}}}, "invalid_settings"),
        ({"settings": {"max_steps_per_turn": 0}}, "invalid_settings"),
        ({"settings": {"scratchpad": {"refs_max_items": 2.5}}}, "invalid_settings"),
        ({"settings": {"unknown": 1}}, "invalid_settings"),
        ({"settings": {"notepad": 3}}, "invalid_settings"),
        ({"compact_threshold": 1.5}, "invalid_value"),
        ({"compact_threshold": 0}, "invalid_value"),
        ({"context_window": 10}, "invalid_value"),
        ({"model": ""}, "invalid_value"),
        ({"tools": [{"name": "bad name!", "input_schema": {"type": "object"}}]}, "invalid_tools"),
        ({"tools": [{"name": "t", "input_schema": {"type": "string"}}]}, "invalid_tools"),
        ({"tools": [CLIENT_TOOL, CLIENT_TOOL]}, "invalid_tools"),
        ({"tools": ["not an object"]}, "invalid_tools"),
    ],
)
async def test_invalid_session_create_is_refused_and_nothing_stored(connect, fields, code):
    client = await connect()
    await client.send({"type": "session.create", **fields})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", code)
    assert await sync_to_async(AgentSession.objects.count)() == 0
    await client.close()


async def test_client_tool_may_not_shadow_a_server_tool(connect, echo_tool):
    client = await connect()
    await client.send({"type": "session.create", "tools": [{**CLIENT_TOOL, "name": "test_echo"}]})
    assert (await client.recv())["code"] == "invalid_tools"
    await client.close()


# -- a turn ----------------------------------------------------------------------------------
async def test_turn_streams_events_with_gapless_seq(connect):
    client = await connect()
    session = await client.create()
    await client.send({"type": "user.message", "content": "hello", "request_id": "m1"})
    frames = await client.until("turn.completed")
    types = [f["type"] for f in frames]
    assert types[:2] == ["user.message", "turn.started"]
    assert "assistant.delta" in types
    assert types[-3:] == ["assistant.message", "usage", "turn.completed"]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert all(f["session_id"] == session["id"] and f["ts"] for f in frames)
    assert frames[1]["request_id"] == "m1"
    assert frames[-1]["stop_reason"] == "end_turn"
    assert frames[-1]["turn_id"] == frames[1]["turn_id"]
    assert "".join(f["text"] for f in frames if f["type"] == "assistant.delta") == "You said: hello"
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert message["content"] == [{"type": "text", "text": "You said: hello"}]
    usage = next(f for f in frames if f["type"] == "usage")
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["estimated_next_prompt_tokens"] > usage["input_tokens"]
    assert await client.nothing_more()
    await client.close()


async def test_empty_user_message_is_refused(connect):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "   "})
    assert (await client.recv())["code"] == "invalid_frame"
    await client.close()


async def test_session_get_returns_state(connect):
    client = await connect()
    session = await client.create(title="s")
    await client.send({"type": "user.message", "content": "hi"})
    await client.until("turn.completed")
    await client.send({"type": "session.get", "request_id": "g"})
    reply = await client.recv()
    assert reply["type"] == "session.state"
    assert reply["request_id"] == "g"
    assert reply["session"]["id"] == session["id"]
    assert reply["session"]["last_seq"] == 6
    assert reply["session"]["status"] == "idle"
    assert reply["session"]["last_prompt_tokens"] > 0
    await client.close()


async def test_history_is_stored_as_sent(connect):
    client = await connect()
    session = await client.create()
    await client.send({"type": "user.message", "content": "one"})
    await client.until("turn.completed")
    await client.send({"type": "user.message", "content": "two"})
    await client.until("turn.completed")
    messages = await alist(
        Message.objects.filter(session_id=session["id"]).values_list("position", "role", "content")
    )
    assert messages == [
        (0, "user", [{"type": "text", "text": "one"}]),
        (1, "assistant", [{"type": "text", "text": "You said: one"}]),
        (2, "user", [{"type": "text", "text": "two"}]),
        (3, "assistant", [{"type": "text", "text": "You said: two"}]),
    ]
    await client.close()


# -- tools ---------------------------------------------------------------------------------
async def test_client_tool_waits_for_tool_result(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": 'tool client_lookup {"q": "weather"}'})
    frames = await client.until("tool.call")
    call = frames[-1]
    assert call["name"] == "client_lookup"
    assert call["input"] == {"q": "weather"}
    assert call["executor"] == "client"
    assert await client.nothing_more()  # the turn waits for us
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "sunny"})
    frames = await client.until("turn.completed")
    result = frames[0]
    assert result["type"] == "tool.result"
    assert result == {
        **result,
        "tool_use_id": call["tool_use_id"],
        "name": "client_lookup",
        "is_error": False,
        "content": "sunny",
    }
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert message["content"][0]["text"] == "client_lookup returned: sunny"
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_client_tool_error_result_with_content_blocks(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    blocks = [{"type": "text", "text": "not found"}]
    await client.send(
        {"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": blocks, "is_error": True}
    )
    frames = await client.until("turn.completed")
    assert frames[0]["is_error"] is True
    assert frames[0]["content"] == blocks
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert message["content"][0]["text"] == "client_lookup failed: not found"
    await client.close()


async def test_tool_result_for_unknown_id_is_refused(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "tool.result", "tool_use_id": "toolu_nope", "content": "x"})
    assert (await client.recv())["code"] == "unknown_tool_use_id"
    await client.close()


async def test_second_tool_result_for_same_call_is_refused(connect, fake_anthropic):
    from tests.fake_anthropic import Reply, text

    client = await connect()
    await client.create(model="claude-sonnet-4-6", tools=[CLIENT_TOOL])
    # Two calls in one step keep the turn waiting after the first answer.
    fake_anthropic.enqueue(
        Reply(
            content=[
                {"type": "tool_use", "id": "toolu_a", "name": "client_lookup", "input": {"q": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "client_lookup", "input": {"q": "b"}},
            ],
            stop_reason="tool_use",
        ),
        text("both answered"),
    )
    await client.send({"type": "user.message", "content": "two lookups"})
    await client.until("tool.call")
    await client.until("tool.call")
    await client.send({"type": "tool.result", "tool_use_id": "toolu_a", "content": "first"})
    await client.send({"type": "tool.result", "tool_use_id": "toolu_a", "content": "again", "request_id": 9})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("tool_result_already_given", 9)
    await client.send({"type": "tool.result", "tool_use_id": "toolu_b", "content": "second"})
    frames = await client.until("turn.completed")
    results = [f for f in frames if f["type"] == "tool.result"]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [
        ("toolu_a", "first"),
        ("toolu_b", "second"),
    ]
    sent = fake_anthropic.requests[1].body["messages"][-1]["content"]
    assert [(b["tool_use_id"], b["content"]) for b in sent] == [("toolu_a", "first"), ("toolu_b", "second")]
    await client.close()


async def test_tool_result_content_blocks_must_have_a_type(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": [{"text": "x"}]})
    assert (await client.recv())["code"] == "invalid_frame"
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "fine"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_user_message_during_turn_gets_turn_in_progress(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "user.message", "content": "me again", "request_id": "again"})
    reply = await client.recv()
    assert (reply["type"], reply["code"], reply["request_id"]) == ("error", "turn_in_progress", "again")
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "ok"})
    await client.until("turn.completed")
    user_texts = await alist(Message.objects.filter(role="user").values_list("content", flat=True))
    assert all("me again" not in json.dumps(c) for c in user_texts)
    await client.close()


async def test_server_tool_runs_and_model_sees_result(connect, echo_tool):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": 'tool test_echo {"text": "ping"}'})
    frames = await client.until("turn.completed")
    call = next(f for f in frames if f["type"] == "tool.call")
    assert call["executor"] == "server"
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is False
    assert json.loads(result["content"]) == {"echo": "ping", "step": 1}
    final = [f for f in frames if f["type"] == "assistant.message"][-1]
    assert final["content"][0]["text"] == 'test_echo returned: {"echo": "ping", "step": 1}'
    await client.close()


async def test_server_tool_error_is_a_tool_error_the_model_reads(connect, echo_tool):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": 'tool test_echo {"fail": true}'})
    frames = await client.until("turn.completed")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is True
    assert result["content"] == "test_echo cannot do that: fail was set"
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_server_tool_crash_is_reported_without_details(connect, echo_tool):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": 'tool test_echo {"crash": true}'})
    frames = await client.until("turn.completed")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is True
    assert "boom" not in result["content"]
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_max_steps_ends_the_turn(connect, fake_anthropic):
    from tests.fake_anthropic import tool_use

    client = await connect()
    await client.create(model="claude-sonnet-4-6", tools=[CLIENT_TOOL], settings={"max_steps_per_turn": 2})
    fake_anthropic.enqueue(tool_use("client_lookup", {"q": "1"}), tool_use("client_lookup", {"q": "2"}))
    await client.send({"type": "user.message", "content": "loop"})
    for _ in range(2):
        call = (await client.until("tool.call"))[-1]
        await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "again"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "max_steps"
    assert len(fake_anthropic.requests) == 2
    await client.close()


# -- cancel ----------------------------------------------------------------------------------
async def test_cancel_while_waiting_for_client_tool(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "cancelled"
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["tool_use_id"] == call["tool_use_id"] and result["is_error"] is True
    # The history stays valid: the next turn runs normally.
    await client.send({"type": "user.message", "content": "after"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


def _answers(frames):
    return [block["text"] for f in frames if f["type"] == "assistant.message" for block in f["content"]]


@pytest.mark.parametrize("position", ["system", "message"])
async def test_the_scripted_model_answers_the_message_after_a_cancelled_turn(connect, position):
    # The cancelled call's tool result and the next user message share one user message (with
    # the notepad's block between them in position "message"): the words are what it answers.
    client = await connect()
    await client.create(tools=[CLIENT_TOOL], settings={"notepad": {"position": position}})
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    await client.until("tool.call")
    await client.send({"type": "turn.cancel"})
    await client.until("turn.completed")
    await client.send({"type": "user.message", "content": "after the cancel"})
    frames = await client.until("turn.completed")
    assert _answers(frames) == ["You said: after the cancel"]
    await client.close()


async def test_the_scripted_model_answers_the_message_after_a_turn_that_ran_out_of_steps(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL], settings={"max_steps_per_turn": 1})
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "found"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "max_steps"
    await client.send({"type": "user.message", "content": "echo next"})
    frames = await client.until("turn.completed")
    assert _answers(frames) == ["next"]
    await client.close()


async def test_the_scripted_model_reports_a_tool_result_with_the_notepad_before_it(connect):
    # Mid-turn the notepad's block (position "message") follows the results: it is no user message.
    client = await connect()
    await client.create(tools=[CLIENT_TOOL], settings={"notepad": {"position": "message"}})
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "found"})
    frames = await client.until("turn.completed")
    assert _answers(frames)[-1] == "client_lookup returned: found"
    await client.close()


async def test_cancel_during_a_slow_model_call(connect, fake_anthropic):
    fake_anthropic.latency_seconds = 3
    client = await connect()
    await client.create(model="claude-sonnet-4-6")
    await client.send({"type": "user.message", "content": "slow"})
    await client.until("turn.started")
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed", timeout=2)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert not any(f["type"] == "assistant.message" for f in frames)
    await client.close()


async def test_cancel_without_turn_gets_error(connect):
    client = await connect()
    await client.create()
    await client.send({"type": "turn.cancel", "request_id": 1})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("no_turn_in_progress", 1)
    await client.close()


# -- attach and replay -----------------------------------------------------------------------
async def test_attach_replays_events_after_since_seq(connect, make_token):
    raw = await make_token()
    first = await connect(raw)
    session = await first.create()
    await first.send({"type": "user.message", "content": "hi"})
    await first.until("turn.completed")
    await first.close()

    second = await connect(raw)
    await second.send(
        {"type": "session.attach", "session_id": session["id"], "since_seq": 3, "request_id": "a"}
    )
    frames = await second.until("session.attached")
    assert [f["seq"] for f in frames[:-1]] == [4, 5, 6]
    assert frames[-1] == {
        "type": "session.attached",
        "session_id": session["id"],
        "last_seq": 6,
        "descendants": [],  # PROTOCOL.md v1.1: the session's sub-sessions (none here)
        "descendants_total": 0,  # additions (docs/clients.md): how many, and whether some
        "descendants_more": False,  # are not followed yet (`session.follow`)
        "pending_tool_calls": [],  # PROTOCOL.md v1.2: no turn waits for a client's tool
        "pending_approvals": [],  # addition (docs/clients.md): nor for an approval
        "request_id": "a",
    }
    await second.send({"type": "session.attach", "session_id": session["id"]})
    frames = await second.until("session.attached")
    assert [f["seq"] for f in frames[:-1]] == [1, 2, 3, 4, 5, 6]
    await second.close()


async def test_disconnect_mid_turn_then_reattach_misses_nothing(connect, make_token):
    raw = await make_token()
    first = await connect(raw)
    session = await first.create(tools=[CLIENT_TOOL])
    await first.send({"type": "user.message", "content": "tool client_lookup {}"})
    frames = await first.until("tool.call")
    seen = frames[-1]["seq"]
    call_id = frames[-1]["tool_use_id"]
    await first.close()

    second = await connect(raw)
    await second.send({"type": "session.attach", "session_id": session["id"], "since_seq": seen})
    replayed = await second.until("session.attached")
    await second.send({"type": "tool.result", "tool_use_id": call_id, "content": "late answer"})
    live = await second.until("turn.completed")
    events = [f for f in replayed + live if "seq" in f]
    assert [f["seq"] for f in events] == list(range(seen + 1, seen + 1 + len(events)))
    stored = await sync_to_async(SessionEvent.objects.filter(session_id=session["id"]).count)()
    assert stored == events[-1]["seq"]
    await second.close()


async def test_a_turn_outlives_its_connection(connect, make_token, fake_anthropic):
    raw = await make_token()
    client = await connect(raw)
    session = await client.create(model="claude-sonnet-4-6")
    fake_anthropic.latency_seconds = 0.3
    await client.send({"type": "user.message", "content": "go"})
    await client.until("turn.started")
    await client.close()
    from sessions_app.engine import runner

    await runner.turns_wait_idle(timeout=5)
    again = await connect(raw)
    await again.send({"type": "session.attach", "session_id": session["id"]})
    frames = await again.until("session.attached")
    assert frames[-2]["type"] == "turn.completed" and frames[-2]["stop_reason"] == "end_turn"
    await again.close()


async def test_live_events_reach_every_attached_client(connect, make_token):
    raw = await make_token()
    one = await connect(raw)
    session = await one.create()
    two = await connect(raw)
    await two.send({"type": "session.attach", "session_id": session["id"]})
    await two.until("session.attached")
    await one.send({"type": "user.message", "content": "both"})
    seen_one = await one.until("turn.completed")
    seen_two = await two.until("turn.completed")
    assert [f["seq"] for f in seen_one] == [f["seq"] for f in seen_two]
    await one.close()
    await two.close()


async def test_attach_to_another_clients_session_reveals_nothing(connect):
    owner = await connect()
    session = await owner.create(title="secret")
    stranger = await connect()
    await stranger.send({"type": "session.attach", "session_id": session["id"]})
    refused = await stranger.recv()
    await stranger.send({"type": "session.attach", "session_id": "00000000-0000-0000-0000-000000000000"})
    missing = await stranger.recv()
    assert refused["code"] == missing["code"] == "session_not_found"
    assert refused["message"] == missing["message"]
    assert "secret" not in json.dumps(refused)
    await stranger.send({"type": "user.message", "content": "hijack"})
    assert (await stranger.recv())["code"] == "not_attached"
    await owner.close()
    await stranger.close()


async def test_attach_with_malformed_id_or_negative_since_seq(connect):
    client = await connect()
    await client.send({"type": "session.attach", "session_id": "not-a-uuid"})
    assert (await client.recv())["code"] == "session_not_found"
    session = await client.create()
    await client.send({"type": "session.attach", "session_id": session["id"], "since_seq": -1})
    assert (await client.recv())["code"] == "invalid_frame"
    await client.close()


# -- inputs that would poison the history or the database ------------------------------------
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ([], "non-empty list"),
        ([{"type": "text", "text": ""}], "without text"),
        ([{"type": "bogus"}], "has type 'bogus'"),
        ([{"type": "image", "source": {"type": "base64"}}], "needs data and media_type"),
        ([{"type": "document"}], "without a valid source"),
    ],
)
async def test_tool_result_blocks_the_model_api_would_refuse_are_refused(connect, content, problem):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": content})
    reply = await client.recv()
    assert reply["code"] == "invalid_frame" and problem in reply["message"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": [image]})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_nul_character_is_refused_and_nothing_stored(connect):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "before\u0000after"})
    reply = await client.recv()
    assert reply["code"] == "invalid_frame" and "U+0000" in reply["message"]
    assert await sync_to_async(Message.objects.count)() == 0
    await client.close()


async def test_deeply_nested_json_is_an_error_not_a_dropped_connection(connect):
    client = await connect()
    await client.send("[" * 200_000 + "]" * 200_000)
    assert (await client.recv())["code"] == "invalid_json"
    assert (await client.create())["id"]
    await client.close()


async def test_an_unexpected_failure_answers_internal_error_and_keeps_the_connection(connect, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(engine_sessions, "session_create", broken)
    client = await connect()
    await client.send({"type": "session.create", "request_id": "x"})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("internal_error", "x")
    assert "fire" not in reply["message"]
    monkeypatch.undo()
    assert (await client.create())["id"]
    await client.close()


async def test_a_stalled_turn_taken_over_writes_nothing_and_its_client_call_stays_answerable(connect):
    from datetime import timedelta

    from django.utils import timezone

    client = await connect()
    session = await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    # Its runner stalls past the lease (as if its process died): the next frame repairs the turn,
    # which waits for the client, so it is taken over rather than ended.
    await sync_to_async(AgentSession.objects.filter(pk=session["id"]).update)(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    await client.send({"type": "user.message", "content": "echo second", "request_id": 7})
    refused = await client.recv()
    assert (refused["type"], refused["code"], refused["request_id"]) == ("error", "turn_in_progress", 7)
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "in time"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert await client.nothing_more()  # one turn.completed: the stalled runner ended silently
    contents = await alist(Message.objects.filter(session_id=session["id"]).order_by("position"))
    results = [b for m in contents for b in m.content if b.get("type") == "tool_result"]
    assert results == [{"type": "tool_result", "tool_use_id": call["tool_use_id"], "content": "in time"}]
    assert [m.content for m in contents if m.role == "assistant"][-1] == [
        {"type": "text", "text": "client_lookup returned: in time"}
    ]
    await client.close()


async def test_a_failing_heartbeat_does_not_lose_the_lease(connect, settings, monkeypatch):
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 0.3
    real = services.turn_heartbeat
    failures = {"left": 2}

    def flaky(**kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("database is locked")
        return real(**kwargs)

    monkeypatch.setattr(services, "turn_heartbeat", flaky)
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    import asyncio

    await asyncio.sleep(0.6)
    assert failures["left"] == 0
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "fine"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_cancel_accepted_as_the_turn_begins_stops_its_first_model_call_at_once(
    connect, monkeypatch, settings
):
    """The start does not check for a cancel after it commits: one accepted from that moment
    wakes the first model call at once, which is abandoned (no answer stored), not noticed at
    the next poll or when the answer is stored."""
    import asyncio

    from sessions_app.engine import runner as engine_runner

    settings.PALIMPSEST_POLL_SECONDS = 60  # no poll comes to the rescue
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.5  # a long answer: ~15 s
    loop = asyncio.get_running_loop()
    real_open = engine_runner.TurnRunner.open

    def open_then_cancel(self, **kwargs):
        real_open(self, **kwargs)  # the start has committed
        # The client's cancel lands now, before the runner's first step: accepted, and its
        # notice reaches the event loop before the runner is started.
        services.turn_cancel_request(session_id=self.session_id)
        loop.call_soon_threadsafe(engine_runner.turn_notify, self.session_id)

    monkeypatch.setattr(engine_runner.TurnRunner, "open", open_then_cancel)
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "echo " + " ".join(f"w{i}" for i in range(300))})
    frames = await client.until("turn.completed", timeout=10)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert "assistant.message" not in [f["type"] for f in frames]
    await client.close()


async def test_a_message_refused_during_a_turn_leaves_the_turn_its_wake_ups(connect, settings):
    """A second message while a turn runs cannot begin: the wake-ups its runner took go back to
    the running turn, which a cancel then still stops at once."""
    settings.PALIMPSEST_POLL_SECONDS = 60  # no poll comes to the rescue
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.5  # a long answer: ~15 s
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "echo " + " ".join(f"w{i}" for i in range(300))})
    await client.until("assistant.delta")
    await client.send({"type": "user.message", "content": "and this?", "request_id": "second"})
    refused = await client.until("error")
    assert refused[-1]["code"] == "turn_in_progress"
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed", timeout=3)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert "assistant.message" not in [f["type"] for f in frames]  # stopped mid-answer
    await client.close()


async def test_a_cancel_accepted_while_the_last_step_streams_ends_the_turn_cancelled(connect, monkeypatch):
    """The last step's answer and the turn's end are one write: a cancel accepted before it (the
    model's answer was on its way) ends the turn cancelled, with the answer kept; once it is
    written, there is no turn left to cancel."""
    real_store = services.assistant_step_store_last

    def cancel_then_store(**kwargs):
        services.turn_cancel_request(session_id=kwargs["session_id"])  # the client's cancel lands now
        return real_store(**kwargs)

    monkeypatch.setattr(services, "assistant_step_store_last", cancel_then_store)
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "hello"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "cancelled"
    assert [f["type"] for f in frames].count("assistant.message") == 1
    await client.send({"type": "turn.cancel", "request_id": "late"})
    late = await client.until("error")
    assert late[-1]["code"] == "no_turn_in_progress"
    await client.close()


# -- limits before lookups (PROTOCOL.md v1.1) -------------------------------------------------
async def test_a_model_name_over_100_characters_is_refused_before_any_lookup(connect, fake_anthropic):
    from sessions_app.engine import providers

    client = await connect()
    await client.send({"type": "session.create", "model": "m" * 101, "request_id": "long"})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("invalid_value", "long")
    assert "m" * 101 not in providers._api_windows
    assert fake_anthropic.other_requests == []  # the Models API was not asked
    assert await sync_to_async(AgentSession.objects.count)() == 0
    await client.close()


async def test_a_bad_field_is_refused_before_the_model_is_looked_up(connect, fake_anthropic):
    client = await connect()
    await client.send({"type": "session.create", "model": "claude-new-model", "settings": {"bogus": 1}})
    assert (await client.recv())["code"] == "invalid_settings"
    assert fake_anthropic.other_requests == []
    await client.close()


async def test_the_models_api_answers_are_remembered_in_a_bounded_cache(fake_anthropic):
    from sessions_app.engine import providers

    providers._api_windows.clear()
    fake_anthropic.models = {"claude-next": 500_000}
    assert await providers.context_window_resolve("claude-next") == 500_000
    assert await providers.context_window_resolve("claude-next") == 500_000
    assert len(fake_anthropic.other_requests) == 1  # the second answer came from the cache
    for n in range(providers.MODEL_WINDOW_CACHE_SIZE + 10):
        providers._api_windows.set(f"model-{n}", 128_000)
    assert len(providers._api_windows) == providers.MODEL_WINDOW_CACHE_SIZE
    providers._api_windows.clear()


# -- values Python parses but nothing downstream can hold ------------------------------------
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type": "session.create", "title": "x", "n": ' + "9" * 5000 + "}", "invalid_frame"),
        ('{"type": "session.create", "title": "\\ud800"}', "invalid_frame"),
        ('{"type": "session.create", "settings": {"\\udfff": 1}}', "invalid_frame"),
        ('{"type": "session.create", "context_window": 1e999}', "invalid_frame"),
        ('{"type": "session.create", "compact_threshold": NaN}', "invalid_json"),
        ('{"type": "session.create", "compact_threshold": -Infinity}', "invalid_json"),
        ('{"type": "session.attach", "session_id": "x", "since_seq": 9223372036854775808}', "invalid_frame"),
    ],
)
async def test_unrepresentable_values_are_an_error_frame_not_a_traceback(connect, caplog, frame, code):
    client = await connect()
    await client.send(frame)
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", code)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert (await client.create())["id"]
    await client.close()


async def test_a_surrogate_pair_written_as_escapes_is_one_character_and_fine(connect):
    client = await connect()
    session = await client.create(title="\ud83d\ude00")
    assert session["title"] == "\U0001f600"
    await client.close()


async def test_frames_and_events_reach_their_handlers_without_a_hop_to_the_shared_thread(
    connect, monkeypatch
):
    """Channels hops to Django's one shared thread (`aclose_old_connections`) before each message
    a consumer handles; ours go straight to their handlers (`fastpath.compat.LoopDispatch`): a turn's
    frames in and events out pass no such hop."""
    import channels.consumer

    hops = []

    async def counted() -> None:
        hops.append(1)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": "hello"})
    frames = await client.until("turn.completed")
    assert [f["type"] for f in frames if f["type"] == "assistant.message"] == ["assistant.message"]
    assert hops == []
    await client.close()


async def test_a_turn_whose_own_process_stalled_past_its_lease_is_not_repaired(connect, settings):
    """A lease that ran out while its process lives (its event loop stalled past the lease, the
    first model call's imports on a busy machine) is renewed by that process's repair, not
    taken for a dead process's: the turn goes on to its end."""
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.engine import runner as engine_runner

    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.05
    client = await connect()
    session = await client.create()
    await client.send({"type": "user.message", "content": "echo " + " ".join(f"w{i}" for i in range(60))})
    await client.until("assistant.delta")
    expired = timezone.now() - timedelta(seconds=1)
    await AgentSession.objects.filter(pk=session["id"]).aupdate(lease_expires_at=expired)
    assert await engine_runner.turn_repair_if_dead(session_id=session["id"]) is None
    renewed = await AgentSession.objects.aget(pk=session["id"])
    assert renewed.lease_expires_at is not None and renewed.lease_expires_at > timezone.now()
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert "error" not in [f["type"] for f in frames]
    await client.close()


async def test_a_sessions_state_names_the_provider_that_answers_it(connect, settings):
    """PROTOCOL.md v1.2: the public state gains `provider`. Without a provider key the scripted
    model answers every model, and the state says so instead of letting a Claude model's name
    suggest Claude answers."""
    client = await connect()
    await client.send({"type": "session.create", "model": "claude-sonnet-4-6", "request_id": 1})
    assert (await client.recv())["session"]["provider"] == "scripted"
    settings.PALIMPSEST_PROVIDER = "anthropic"
    await client.send({"type": "session.create", "model": "claude-sonnet-4-6", "request_id": 2})
    assert (await client.recv())["session"]["provider"] == "anthropic"
    await client.close()
