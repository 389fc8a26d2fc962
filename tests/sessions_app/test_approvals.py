"""Tool approvals (issue 36, item 5): an `always_ask` server call waits, stored, for the owning
client's `tool.approve` / `tool.deny` (or the API's, or an operator's); a denial is a tool error
the model reads; the answer is bound to the call's id and input; `turn.cancel` ends the wait."""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import json
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from config.settings import _approvals_default_from_env
from sessions_app import services
from sessions_app.common.approvals import (
    ALWAYS_ALLOW,
    ALWAYS_ASK,
    PolicyMapError,
    input_sha256,
    policy_for,
    policy_map_check,
)
from sessions_app.common.processes import process_host
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, SessionEvent, ToolCall
from sessions_app.validation import SpecError
from tests.conftest import alist
from tests.sessions_app.conftest import CLIENT_TOOL
from tests.sessions_app.test_services import _call_data
from tests.sessions_app.test_turn_repair import _exited_pid, _held_by

ASK_ECHO = {"approvals": {"test_echo": "always_ask"}}
ECHO_PING = 'tool test_echo {"text": "ping"}'


async def _asked(client) -> dict:
    """Send the message that makes an `always_ask` call; the `tool.approval_requested` frame."""
    await client.send({"type": "user.message", "content": ECHO_PING})
    frames = await client.until("tool.approval_requested")
    asked = frames[-1]
    assert asked["name"] == "test_echo" and asked["input"] == {"text": "ping"}
    assert asked["input_sha256"] == input_sha256({"text": "ping"})
    call = next(f for f in frames if f["type"] == "tool.call")
    assert call["tool_use_id"] == asked["tool_use_id"]
    assert not any(f["type"] == "tool.result" for f in frames)
    return asked


async def _row(tool_use_id: str) -> ToolCall:
    return await ToolCall.objects.aget(tool_use_id=tool_use_id)


# -- policies -----------------------------------------------------------------------------------
def test_policy_resolution_order_and_patterns():
    session = {"mcp__git__status": ALWAYS_ALLOW, "risky": ALWAYS_ASK}
    service = {"mcp__git__*": ALWAYS_ASK, "*": ALWAYS_ALLOW}
    features = {"mcp__*": ALWAYS_ASK}
    assert policy_for("mcp__git__status", session, service, features) == ALWAYS_ALLOW
    assert policy_for("mcp__git__log", session, service, features) == ALWAYS_ASK
    assert policy_for("risky", session, service, features) == ALWAYS_ASK
    # "*" in the service's map decides before the features' defaults.
    assert policy_for("mcp__time__now", session, service, features) == ALWAYS_ALLOW
    assert policy_for("mcp__time__now", session, {}, features) == ALWAYS_ASK
    assert policy_for("notepad_write", None, {}, features) == ALWAYS_ALLOW
    # The longest pattern of one map wins.
    assert policy_for("mcp__git__x", {"mcp__*": ALWAYS_ALLOW, "mcp__git__*": ALWAYS_ASK}) == ALWAYS_ASK


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"bad name!": ALWAYS_ASK},
        {"x": "sometimes"},
        {"x": None},
        {"a*b": ALWAYS_ASK},
        {"x" * 65: ALWAYS_ASK},
    ],
)
def test_policy_map_refuses_bad_entries(value):
    with pytest.raises(PolicyMapError):
        policy_map_check(value, where="w")


@pytest.mark.django_db
def test_settings_approvals_are_validated_and_merged():
    from sessions_app.engine.features import features
    from sessions_app.validation import settings_clean

    schema = features().settings_schema
    assert settings_clean({}, schema=schema)["approvals"] == {}
    with pytest.raises(SpecError) as caught:
        settings_clean({"approvals": {"x": "maybe"}}, schema=schema)
    assert caught.value.code == "invalid_settings" and "settings.approvals.x" in caught.value.message
    base = settings_clean({"approvals": {"a": ALWAYS_ASK, "b": ALWAYS_ASK}}, schema=schema)
    merged = settings_clean({"approvals": {"b": None, "c": ALWAYS_ALLOW}}, schema=schema, base=base)
    assert merged["approvals"] == {"a": ALWAYS_ASK, "c": ALWAYS_ALLOW}


async def test_session_update_with_a_bad_policy_changes_nothing(connect, echo_tool):
    client = await connect()
    session = await client.create(settings=ASK_ECHO)
    await client.send({"type": "session.update", "settings": {"approvals": {"test_echo": "never"}}})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_settings")
    stored = await AgentSession.objects.aget(pk=session["id"])
    assert stored.settings["approvals"] == {"test_echo": ALWAYS_ASK}


# -- the wait and the answers -----------------------------------------------------------------
async def test_approve_runs_the_call(connect, echo_tool, vendor):
    client = await connect()
    await client.create(settings=ASK_ECHO)
    asked = await _asked(client)
    assert await client.nothing_more()  # the turn waits
    row = await _row(asked["tool_use_id"])
    assert (row.approval, row.status, row.started_at) == ("pending", "pending", None)
    await client.send({"type": "tool.approve", "tool_use_id": asked["tool_use_id"]})
    frames = await client.until("turn.completed")
    answered = frames[0]
    assert answered["type"] == "tool.approval_answered"
    assert answered["approved"] is True and answered["author"].startswith("client:")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is False and json.loads(result["content"])["echo"] == "ping"
    assert frames[-1]["stop_reason"] == "end_turn"
    row = await _row(asked["tool_use_id"])
    assert (row.approval, row.status) == ("approved", "done") and row.started_at is not None
    await client.close()


async def test_deny_is_a_tool_error_the_model_reads(connect, echo_tool):
    client = await connect()
    await client.create(settings=ASK_ECHO)
    asked = await _asked(client)
    await client.send({"type": "tool.deny", "tool_use_id": asked["tool_use_id"], "reason": "not on a Friday"})
    frames = await client.until("turn.completed")
    answered = frames[0]
    assert (answered["approved"], answered["reason"]) == (False, "not on a Friday")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is True
    assert "denied" in result["content"] and "not on a Friday" in result["content"]
    final = [f for f in frames if f["type"] == "assistant.message"][-1]
    assert "not on a Friday" in final["content"][0]["text"]  # the scripted model read the error
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_bad_answers_are_refused_and_change_nothing(connect, echo_tool, vendor):
    client = await connect()
    await client.create(settings=ASK_ECHO, tools=[CLIENT_TOOL])
    asked = await _asked(client)
    tool_use_id = asked["tool_use_id"]
    bad = [
        ({"type": "tool.approve", "tool_use_id": "toolu_other"}, "unknown_tool_use_id"),
        (
            {"type": "tool.approve", "tool_use_id": tool_use_id, "input_sha256": "0" * 64},
            "approval_input_mismatch",
        ),
        ({"type": "tool.deny", "tool_use_id": tool_use_id, "reason": "x" * 2001}, "invalid_frame"),
        ({"type": "tool.approve"}, "invalid_frame"),
        ({"type": "tool.deny", "tool_use_id": tool_use_id, "reason": 3}, "invalid_frame"),
    ]
    for index, (frame, code) in enumerate(bad):
        await client.send({**frame, "request_id": index})
        reply = await client.recv()
        assert (reply["type"], reply["code"], reply.get("request_id")) == ("error", code, index), frame
    row = await _row(tool_use_id)
    assert (row.approval, row.approval_author, row.status) == ("pending", "", "pending")
    assert not await SessionEvent.objects.filter(type="tool.approval_answered").aexists()
    # Another client cannot answer it: the call is not in any session of its own.
    other = await connect()
    await other.create()
    await other.send({"type": "tool.approve", "tool_use_id": tool_use_id})
    assert (await other.recv())["code"] == "unknown_tool_use_id"
    assert (await _row(tool_use_id)).approval == "pending"
    # The right answer, with the digest of the input it saw; a second answer is refused.
    await client.send(
        {"type": "tool.approve", "tool_use_id": tool_use_id, "input_sha256": asked["input_sha256"]}
    )
    await client.until("turn.completed")
    await client.send({"type": "tool.deny", "tool_use_id": tool_use_id, "request_id": "late"})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("approval_not_pending", "late")
    assert (await _row(tool_use_id)).approval == "approved"
    await other.close()
    await client.close()


async def test_a_call_nobody_was_asked_about_cannot_be_answered(connect, echo_tool):
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": ECHO_PING})
    frames = await client.until("turn.completed")
    assert not any(f["type"] == "tool.approval_requested" for f in frames)
    call = next(f for f in frames if f["type"] == "tool.call")
    await client.send({"type": "tool.approve", "tool_use_id": call["tool_use_id"]})
    assert (await client.recv())["code"] == "approval_not_pending"
    await client.close()


async def test_cancel_while_waiting_ends_the_turn(connect, echo_tool):
    client = await connect()
    await client.create(settings=ASK_ECHO)
    asked = await _asked(client)
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "cancelled"
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["tool_use_id"] == asked["tool_use_id"] and result["is_error"] is True
    assert "cancelled" in result["content"].lower()
    # The call never ran and can no longer be answered.
    row = await _row(asked["tool_use_id"])
    assert (row.status, row.started_at) == ("done", None)
    await client.send({"type": "tool.approve", "tool_use_id": asked["tool_use_id"]})
    assert (await client.recv())["code"] == "approval_not_pending"
    # The history stays valid: the next turn runs normally.
    await client.send({"type": "user.message", "content": "after"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_allowed_calls_of_the_step_wait_with_the_asked_one(connect, echo_tool, fake_anthropic):
    # Two calls in one step: the allowed one (first in the model's order) runs only once the
    # asked one is answered; the denied one does not run.
    from tests.fake_anthropic import Reply, text

    fake_anthropic.enqueue(
        Reply(
            [
                {"type": "tool_use", "id": "toolu_allowed", "name": "test_echo", "input": {"text": "one"}},
                {"type": "tool_use", "id": "toolu_asked", "name": "count_words", "input": {"text": "a b"}},
            ],
            stop_reason="tool_use",
        ),
        text("done"),
    )
    client = await connect()
    await client.create(model="claude-sonnet-4-6", settings={"approvals": {"count_words": "always_ask"}})
    await client.send({"type": "user.message", "content": "go"})
    frames = await client.until("tool.approval_requested")
    assert frames[-1]["tool_use_id"] == "toolu_asked"
    assert await client.nothing_more()  # nothing ran: the step waits as a whole
    assert (await _row("toolu_allowed")).started_at is None
    await client.send({"type": "tool.deny", "tool_use_id": "toolu_asked"})
    frames = await client.until("turn.completed")
    results = {f["tool_use_id"]: f for f in frames if f["type"] == "tool.result"}
    assert results["toolu_allowed"]["is_error"] is False
    assert results["toolu_asked"]["is_error"] is True
    assert results["toolu_asked"]["content"] == "This call of count_words was denied: it did not run."
    sent = fake_anthropic.requests[-1].body["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in sent if b.get("type") == "tool_result"] == [
        "toolu_allowed",
        "toolu_asked",
    ]
    await client.close()


async def test_service_default_and_session_override(connect, echo_tool, settings):
    settings.PALIMPSEST_APPROVALS_DEFAULT = {"test_*": ALWAYS_ASK}
    client = await connect()
    await client.create()
    await _asked(client)
    await client.send({"type": "turn.cancel"})
    await client.until("turn.completed")
    # The session's own setting decides first.
    await client.send({"type": "session.update", "settings": {"approvals": {"test_echo": "always_allow"}}})
    assert (await client.recv())["type"] == "session.state"
    await client.send({"type": "user.message", "content": ECHO_PING})
    frames = await client.until("turn.completed")
    assert not any(f["type"] == "tool.approval_requested" for f in frames)
    await client.close()


async def test_client_tools_are_never_asked(connect, settings):
    settings.PALIMPSEST_APPROVALS_DEFAULT = {"*": ALWAYS_ASK}
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    frames = await client.until("tool.call")
    assert frames[-1]["executor"] == "client"
    assert await client.nothing_more()
    row = await _row(frames[-1]["tool_use_id"])
    assert row.approval == ""
    await client.send({"type": "tool.result", "tool_use_id": row.tool_use_id, "content": "ok"})
    await client.until("turn.completed")
    await client.close()


async def test_agent_settings_give_their_sessions_the_policy(connect, echo_tool):
    client = await connect()
    await client.send({"type": "agent.create", "name": "careful", "settings": ASK_ECHO})
    assert (await client.recv())["type"] == "agent.created"
    session = await client.create(agent="careful")
    stored = await AgentSession.objects.aget(pk=session["id"])
    assert stored.settings["approvals"] == {"test_echo": ALWAYS_ASK}
    await _asked(client)
    await client.send({"type": "turn.cancel"})
    await client.until("turn.completed")
    await client.close()


async def test_the_requested_event_is_stored_for_replay(connect, echo_tool):
    client = await connect()
    session = await client.create(settings=ASK_ECHO)
    asked = await _asked(client)
    stored = await alist(
        SessionEvent.objects.filter(session_id=session["id"], type="tool.approval_requested").values_list(
            "payload", flat=True
        )
    )
    assert stored[0]["tool_use_id"] == asked["tool_use_id"]
    await client.send({"type": "turn.cancel"})
    await client.until("turn.completed")
    await client.close()


def test_session_update_engine_rejects_bad_policy(db):
    session = engine_sessions.session_create(owner=None)
    with pytest.raises(SpecError):
        engine_sessions.session_update(session_id=session.pk, settings={"approvals": {"x": 1}})
    assert AgentSession.objects.get(pk=session.pk).settings["approvals"] == {}


# -- the repair of a turn whose process died while its step waited ----------------------------
def _asked_step(session_id, turn_id, *calls: tuple[str, str]) -> None:
    """A stored step whose calls ((id, approval), server tools) wait as the engine stores them."""
    services.assistant_step_store(
        session_id=session_id,
        turn_id=turn_id,
        epoch=0,
        content=[{"type": "tool_use", "id": i, "name": "test_echo", "input": {"text": i}} for i, _ in calls],
        call=_call_data(),
        tool_calls=[services.PlannedToolCall(i, "test_echo", {"text": i}, "server", a) for i, a in calls],
    )


def _dead(session_id) -> None:
    AgentSession.objects.filter(pk=session_id).update(
        lease_expires_at=timezone.now() - datetime.timedelta(seconds=1)
    )


def test_a_dead_turn_waiting_for_an_approval_is_taken_over_with_its_stored_input(db, vendor):
    session = engine_sessions.session_create(owner=None)
    turn = services.turn_begin(session_id=session.pk, content="one", holder=uuid.uuid4())
    _asked_step(session.pk, turn.id, ("toolu_a", ""), ("toolu_b", "pending"))
    # Answered while no process ran the turn: the answer is kept for the one that takes it over.
    services.tool_call_approval_answer(
        session_id=session.pk, tool_use_id="toolu_b", approved=True, author="client:x"
    )
    _dead(session.pk)
    repair = services.turn_repair(session_id=session.pk, holder=uuid.uuid4())
    assert repair is not None and repair.resumed and repair.rerun_server
    assert [(c.tool_use_id, c.approval, c.input) for c in repair.calls] == [
        ("toolu_a", "", {"text": "toolu_a"}),
        ("toolu_b", "approved", {"text": "toolu_b"}),
    ]


def test_a_dead_turn_whose_approved_calls_had_begun_is_ended_not_run_twice(db, vendor):
    session = engine_sessions.session_create(owner=None)
    holder = uuid.uuid4()
    turn = services.turn_begin(session_id=session.pk, content="one", holder=holder)
    _asked_step(session.pk, turn.id, ("toolu_b", "pending"))
    services.tool_call_approval_answer(
        session_id=session.pk, tool_use_id="toolu_b", approved=True, author="client:x"
    )

    def started():
        services.lease_hold(session_id=session.pk, holder=holder)
        services.tool_calls_started(session_id=session.pk, turn_id=turn.id, tool_use_ids=["toolu_b"])

    contextvars.copy_context().run(started)
    _dead(session.pk)
    repair = services.turn_repair(session_id=session.pk, holder=uuid.uuid4())
    assert repair is not None and not repair.resumed
    call = ToolCall.objects.get(tool_use_id="toolu_b")
    assert (call.status, call.is_error) == ("done", True)


def test_a_cancelled_dead_turn_waiting_for_an_approval_is_ended(db):
    session = engine_sessions.session_create(owner=None)
    turn = services.turn_begin(session_id=session.pk, content="one", holder=uuid.uuid4())
    _asked_step(session.pk, turn.id, ("toolu_b", "pending"))
    services.turn_cancel_request(session_id=session.pk)
    _dead(session.pk)
    repair = services.turn_repair(session_id=session.pk, holder=uuid.uuid4())
    assert repair is not None and not repair.resumed
    with pytest.raises(services.ApprovalNotPending):
        services.tool_call_approval_answer(
            session_id=session.pk, tool_use_id="toolu_b", approved=True, author="client:x"
        )


def test_the_service_default_from_the_environment():
    assert _approvals_default_from_env("") == {}
    assert _approvals_default_from_env("always_ask") == {"*": ALWAYS_ASK}
    assert _approvals_default_from_env('{"mcp__*": "always_allow", "risky": "always_ask"}') == {
        "mcp__*": ALWAYS_ALLOW,
        "risky": ALWAYS_ASK,
    }
    for bad in ("sometimes", '{"x": "never"}', '["always_ask"]', '{"bad name": "always_ask"}', '{"x": null}'):
        with pytest.raises(ImproperlyConfigured):
            _approvals_default_from_env(bad)


async def test_attach_lists_the_waiting_approvals(connect, make_token, echo_tool, vendor):
    token = await make_token()
    first = await connect(token)
    session = await first.create(settings=ASK_ECHO)
    asked = await _asked(first)
    second = await connect(token)
    await second.send({"type": "session.attach", "session_id": session["id"], "since_seq": asked["seq"]})
    attached = (await second.until("session.attached"))[-1]
    assert attached["pending_approvals"] == [
        {
            "tool_use_id": asked["tool_use_id"],
            "name": "test_echo",
            "input": {"text": "ping"},
            "input_sha256": asked["input_sha256"],
        }
    ]
    assert attached["pending_tool_calls"] == [] and "resumes_at" not in attached  # it runs here
    await second.send({"type": "tool.approve", "tool_use_id": asked["tool_use_id"]})
    assert (await second.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await first.close()
    await second.close()


async def test_attach_after_the_holder_died_takes_the_waiting_turn_over_and_the_answer_runs_it(
    connect, make_token, echo_tool
):
    token = await make_token()
    client = await connect(token)
    session = await client.create(settings=ASK_ECHO)
    turn = await asyncio.to_thread(
        services.turn_begin, session_id=session["id"], content="one", holder=uuid.uuid4()
    )
    await asyncio.to_thread(_asked_step, session["id"], turn.id, ("toolu_w", "pending"))
    await asyncio.to_thread(_held_by, session["id"], host=process_host(), pid=_exited_pid(), expires_in=60)
    last_seq = (await AgentSession.objects.aget(pk=session["id"])).last_seq
    await client.send({"type": "session.attach", "session_id": session["id"], "since_seq": last_seq})
    attached = (await client.until("session.attached"))[-1]
    assert [a["tool_use_id"] for a in attached["pending_approvals"]] == ["toolu_w"]
    assert "resumes_at" in attached and runner.turn_running_here(turn.id)
    await client.send({"type": "tool.approve", "tool_use_id": "toolu_w"})
    frames = await client.until("turn.completed")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is False and json.loads(result["content"])["echo"] == "toolu_w"
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_sub_sessions_call_is_answered_through_its_roots_connection(connect, echo_tool):
    # The child inherits the parent's settings: its own test_echo call asks, and the root's client
    # (which follows its children's events) answers it with the frame.
    client = await connect()
    root = await client.create(settings=ASK_ECHO)
    task = 'tool test_echo {"text": "from the child"}'
    await client.send({"type": "user.message", "content": "tool spawn_session " + json.dumps({"task": task})})
    asked = (await client.until("tool.approval_requested"))[-1]
    assert asked["session_id"] != root["id"] and asked["input"] == {"text": "from the child"}
    await client.send({"type": "tool.approve", "tool_use_id": asked["tool_use_id"]})
    frames = await client.until("turn.completed")
    while frames[-1]["session_id"] != root["id"]:
        frames += await client.until("turn.completed")
    child_results = [
        f for f in frames if f["type"] == "tool.result" and f["session_id"] == asked["session_id"]
    ]
    assert child_results and child_results[0]["is_error"] is False
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()
