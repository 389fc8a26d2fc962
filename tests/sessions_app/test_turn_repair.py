"""The repair of a turn whose process died (its lease ran out): taken over while it waits for a
client's tool results, else ended with `server_stopped`; two repairers, one wins; a stalled
runner writes nothing once its turn is taken over; a tool.result that cannot be used is refused
with an error frame. (Real daphne processes killed with SIGKILL: test_turn_repair_daphne.py.)"""

from __future__ import annotations

import asyncio
import contextvars
import os
import subprocess
import sys
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from sessions_app import announce, services
from sessions_app.common.processes import process_host
from sessions_app.engine import runner as engine_runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, Message, SessionEvent, ToolCall, Turn
from tests.sessions_app.conftest import CLIENT_TOOL
from tests.sessions_app.test_services import _call_data


@pytest.fixture
def announced(monkeypatch):
    frames: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: frames.extend)
    return frames


@pytest.fixture
def session(db):
    return engine_sessions.session_create(owner=None, tools=[CLIENT_TOOL])


def _expire(session_id: uuid.UUID) -> None:
    AgentSession.objects.filter(pk=session_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def _step(session_id: uuid.UUID, turn_id: uuid.UUID, *calls: tuple[str, str, str]) -> None:
    """The model's step asking for `calls` ((id, name, executor), in order)."""
    services.assistant_step_store(
        session_id=session_id,
        turn_id=turn_id,
        epoch=0,
        content=[{"type": "tool_use", "id": i, "name": name, "input": {"q": i}} for i, name, _ in calls],
        call=_call_data(),
        tool_calls=[services.PlannedToolCall(i, name, {"q": i}, executor) for i, name, executor in calls],
    )


def _types(session_id: uuid.UUID) -> list[str]:
    return list(
        SessionEvent.objects.filter(session_id=session_id).order_by("seq").values_list("type", flat=True)
    )


def _as(holder: uuid.UUID, leased: uuid.UUID, fn, **kwargs):
    """Call `fn` as the runner holding `holder` of session `leased`'s lease would (its own context)."""

    def run():
        services.lease_hold(session_id=leased, holder=holder)
        return fn(**kwargs)

    return contextvars.copy_context().run(run)


def _repaired(session_id: uuid.UUID) -> services.TurnRepair:
    repair = services.turn_repair(session_id=session_id, holder=uuid.uuid4())
    assert repair is not None
    return repair


def test_a_live_lease_is_not_repaired(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    assert services.turn_repair(session_id=session.id, holder=uuid.uuid4()) is None
    assert AgentSession.objects.get(pk=session.id).current_turn_id == turn.id


def test_a_dead_turn_waiting_for_a_client_is_taken_over_and_its_call_stays_answerable(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_s", "read_notepad", "server"), ("toolu_c", "client_lookup", "client"))
    _expire(session.id)
    events_before = _types(session.id)
    new_holder = uuid.uuid4()
    repair = services.turn_repair(session_id=session.id, holder=new_holder)
    assert repair is not None and repair.resumed and repair.turn_id == turn.id and repair.steps == 1
    assert [(c.tool_use_id, c.executor) for c in repair.calls] == [
        ("toolu_s", "server"),
        ("toolu_c", "client"),
    ]
    row = AgentSession.objects.get(pk=session.id)
    assert (row.current_turn_id, row.lease_holder, row.status) == (turn.id, new_holder, "running")
    assert row.lease_expires_at is not None and row.lease_expires_at > timezone.now()
    assert _types(session.id) == events_before  # nothing is announced: the turn goes on
    services.tool_call_submit_result(
        session_id=session.id, tool_use_id="toolu_c", content="ok", is_error=False
    )
    assert ToolCall.objects.get(tool_use_id="toolu_c").result == "ok"


def test_a_result_sent_before_the_repair_is_kept_for_the_taken_over_turn(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    # The client answered, but the process that waited for it died before storing it.
    services.tool_call_submit_result(
        session_id=session.id, tool_use_id="toolu_c", content="ok", is_error=False
    )
    _expire(session.id)
    repair = services.turn_repair(session_id=session.id, holder=uuid.uuid4())
    assert repair is not None and repair.resumed
    assert ToolCall.objects.get(tool_use_id="toolu_c").result == "ok"


def test_a_dead_turn_mid_model_call_is_ended_with_server_stopped(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _expire(session.id)
    repair = services.turn_repair(session_id=session.id, holder=uuid.uuid4())
    assert repair is not None and not repair.resumed and repair.turn_id == turn.id
    row = AgentSession.objects.get(pk=session.id)
    assert (row.current_turn_id, row.lease_expires_at, row.lease_holder, row.status) == (
        None,
        None,
        None,
        "idle",
    )
    events = list(SessionEvent.objects.filter(session=session).order_by("seq"))
    assert [(e.type, e.payload.get("code"), e.payload.get("stop_reason")) for e in events[-2:]] == [
        ("error", "server_stopped", None),
        ("turn.completed", None, "error"),
    ]
    assert events[-1].payload["turn_id"] == str(turn.id)
    assert Turn.objects.get(pk=turn.id).stop_reason == "error"
    with pytest.raises(services.NoTurnInProgress):
        services.turn_cancel_request(session_id=session.id)
    services.turn_begin(session_id=session.id, content="two")


def test_a_dead_turn_mid_server_tool_gets_error_results_and_a_valid_history(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_s", "read_notepad", "server"))
    _expire(session.id)
    assert not _repaired(session.id).resumed
    last = Message.objects.filter(session=session).order_by("-position")[0]
    assert last.role == "user"
    assert last.content == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_s",
            "content": services.INTERRUPTED_TOOL_RESULT,
            "is_error": True,
        }
    ]
    assert ToolCall.objects.get(tool_use_id="toolu_s").status == "done"
    # The next turn finds nothing to repair and stores its message right after.
    services.turn_begin(session_id=session.id, content="two")
    assert Message.objects.filter(session=session, metadata__repair="interrupted_turn").count() == 1


def test_a_cancelled_dead_turn_ends_cancelled_without_an_error(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    services.turn_cancel_request(session_id=session.id)
    _expire(session.id)
    assert not _repaired(session.id).resumed
    completed = SessionEvent.objects.filter(session=session).order_by("-seq")[0]
    assert (completed.type, completed.payload["stop_reason"]) == ("turn.completed", "cancelled")
    assert "error" not in _types(session.id)


def test_a_dead_operator_compaction_is_released_with_compaction_failed(session, announced):
    services.compaction_operator_begin(session_id=session.id, holder=uuid.uuid4())
    _expire(session.id)
    assert not _repaired(session.id).resumed
    assert _types(session.id)[-2:] == ["error", "session.status"]
    assert "turn.completed" not in _types(session.id)
    assert AgentSession.objects.get(pk=session.id).current_turn_id is None


def test_a_new_message_does_not_end_a_dead_turn_that_waits_for_a_client(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    _expire(session.id)
    with pytest.raises(services.TurnInProgress):
        services.turn_begin(session_id=session.id, content="two")
    assert ToolCall.objects.get(tool_use_id="toolu_c").status == "pending"


def test_a_stalled_runner_writes_nothing_once_its_turn_is_taken_over(session, announced):
    old = uuid.uuid4()
    turn = services.turn_begin(session_id=session.id, content="one", holder=old)
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    _expire(session.id)
    assert _repaired(session.id).resumed
    before = (Message.objects.count(), SessionEvent.objects.count())
    assert not _as(old, session.id, services.turn_heartbeat, session_id=session.id, turn_id=turn.id)
    with pytest.raises(services.TurnLeaseLost):
        _as(old, session.id, services.turn_is_cancelled, session_id=session.id, turn_id=turn.id)
    assert services.turn_deltas_emit(deltas=[(session.id, turn.id, old, "late")]) == [False]
    with pytest.raises(services.TurnLeaseLost):
        _as(
            old,
            session.id,
            services.tool_results_store,
            session_id=session.id,
            turn_id=turn.id,
            epoch=0,
            outcomes=[],
        )
    _as(
        old,
        session.id,
        services.turn_finish,
        session_id=session.id,
        turn_id=turn.id,
        stop_reason="error",
        steps=1,
    )
    assert (Message.objects.count(), SessionEvent.objects.count()) == before
    assert AgentSession.objects.get(pk=session.id).current_turn_id == turn.id


@pytest.mark.parametrize("waits_for_client", [True, False])
@pytest.mark.django_db(transaction=True)
def test_two_repairers_at_once_one_wins(announced, waits_for_client):
    session = engine_sessions.session_create(owner=None, tools=[CLIENT_TOOL])
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    if waits_for_client:
        _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    _expire(session.id)
    barrier = threading.Barrier(2)
    outcomes: list = []

    def repairer() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(services.turn_repair(session_id=session.id, holder=uuid.uuid4()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=repairer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 2
    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1 and winners[0].resumed is waits_for_client
    assert _types(session.id).count("turn.completed") == (0 if waits_for_client else 1)
    assert Message.objects.filter(session=session, metadata__repair="interrupted_turn").count() == 0


# -- over the websocket ----------------------------------------------------------------------
async def test_the_sweep_ends_a_dead_turn_and_tells_every_attached_client(connect, make_token):
    from sessions_app.engine import repair

    token = await make_token()
    a, b = await connect(token), await connect(token)
    session = await a.create()
    await b.send({"type": "session.attach", "session_id": session["id"]})
    await b.until("session.attached")
    # A turn begun by a process that died before running it (no runner here holds it).
    turn = await sync_to_async(services.turn_begin)(
        session_id=session["id"], content="one", holder=uuid.uuid4()
    )
    await a.until("turn.started")
    await b.until("turn.started")
    await sync_to_async(_expire)(session["id"])
    assert await repair.turns_sweep() == 1
    for client in (a, b):
        error, completed = await client.recv(), await client.recv()
        assert (error["type"], error["code"]) == ("error", "server_stopped")
        assert completed == {
            **completed,
            "type": "turn.completed",
            "turn_id": str(turn.id),
            "stop_reason": "error",
        }
    assert await repair.turns_sweep() == 0
    await a.send({"type": "session.get"})
    assert (await a.recv())["session"]["status"] == "idle"
    await a.send({"type": "turn.cancel"})
    assert (await a.recv())["code"] == "no_turn_in_progress"
    await a.send({"type": "user.message", "content": "echo again"})
    assert (await a.until("turn.completed"))[-1]["stop_reason"] == "end_turn"


async def test_a_tool_result_for_a_turn_that_ended_gets_an_error_frame(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "tool client_lookup {}"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "turn.cancel"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "cancelled"
    await client.send(
        {"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "late", "request_id": 3}
    )
    refused = await client.recv()
    assert (refused["type"], refused["code"], refused["request_id"]) == ("error", "unknown_tool_use_id", 3)
    assert "no longer waits" in refused["message"]
    await client.send({"type": "tool.result", "tool_use_id": "toolu_never", "content": "x"})
    unknown = await client.recv()
    assert (unknown["code"], "no client tool call 'toolu_never'" in unknown["message"]) == (
        "unknown_tool_use_id",
        True,
    )


# -- a lease's holder known gone (same host, its pid gone) or elsewhere ----------------------
def _exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def _held_by(session_id: uuid.UUID, *, host: str, pid: int, expires_in: float) -> datetime:
    """The session's lease as a process `pid` of `host` left it, running out in `expires_in` s."""
    expires = timezone.now() + timedelta(seconds=expires_in)
    AgentSession.objects.filter(pk=session_id).update(
        lease_host=host, lease_pid=pid, lease_expires_at=expires
    )
    return expires


def test_a_lease_records_its_holders_host_and_pid(session, announced):
    services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    row = AgentSession.objects.get(pk=session.id)
    assert (row.lease_host, row.lease_pid) == (process_host(), os.getpid())


def test_a_turn_whose_holder_on_this_host_is_gone_is_taken_over_before_its_lease_ends(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    _held_by(session.id, host=process_host(), pid=_exited_pid(), expires_in=60)
    repair = services.turn_repair(session_id=session.id, holder=uuid.uuid4())
    assert repair is not None and repair.resumed and repair.turn_id == turn.id
    row = AgentSession.objects.get(pk=session.id)
    assert (row.lease_host, row.lease_pid) == (process_host(), os.getpid())


def test_a_turn_whose_holder_is_on_another_host_waits_for_its_lease(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _step(session.id, turn.id, ("toolu_c", "client_lookup", "client"))
    _held_by(session.id, host="elsewhere", pid=_exited_pid(), expires_in=60)
    assert services.turn_repair(session_id=session.id, holder=uuid.uuid4()) is None
    with pytest.raises(services.TurnInProgress):
        services.turn_begin(session_id=session.id, content="two", holder=uuid.uuid4())


def test_a_new_message_ends_a_gone_holders_turn_that_waited_for_nothing(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one", holder=uuid.uuid4())
    _held_by(session.id, host=process_host(), pid=_exited_pid(), expires_in=60)
    services.turn_begin(session_id=session.id, content="two", holder=uuid.uuid4())
    assert Turn.objects.get(pk=turn.id).stop_reason == "error"


async def test_the_sweep_takes_over_a_gone_holders_turn_before_its_lease_ends(connect):
    from sessions_app.engine import repair

    client = await connect()
    session = await client.create(tools=[CLIENT_TOOL])
    turn = await sync_to_async(services.turn_begin)(
        session_id=session["id"], content="one", holder=uuid.uuid4()
    )
    await sync_to_async(_step)(session["id"], turn.id, ("toolu_c", "client_lookup", "client"))
    await sync_to_async(_held_by)(session["id"], host=process_host(), pid=_exited_pid(), expires_in=60)
    assert await repair.turns_sweep() == 1
    assert engine_runner.turn_running_here(turn.id)
    await client.send({"type": "tool.result", "tool_use_id": "toolu_c", "content": "swept"})
    frames = await client.until("turn.completed", timeout=2)
    assert frames[-1]["stop_reason"] == "end_turn"


async def _dead_turn_waiting_for_a_client(client, **held: Any) -> tuple[dict, Turn, Any]:
    """A session whose turn waits for the client's `toolu_c`, its lease left by a process that
    is not this one (`held`: `_held_by`'s host, pid and expires_in)."""
    session = await client.create(tools=[CLIENT_TOOL])
    turn = await sync_to_async(services.turn_begin)(
        session_id=session["id"], content="one", holder=uuid.uuid4()
    )
    await sync_to_async(_step)(session["id"], turn.id, ("toolu_c", "client_lookup", "client"))
    expires = await sync_to_async(_held_by)(session["id"], **held)
    return session, turn, expires


async def _last_seq(session_id: Any) -> int:
    return await sync_to_async(lambda: AgentSession.objects.get(pk=session_id).last_seq)()


async def test_attach_after_the_holder_died_lists_the_calls_and_the_answer_ends_the_turn_at_once(
    connect, make_token
):
    token = await make_token()
    first = await connect(token)
    session, turn, _ = await _dead_turn_waiting_for_a_client(
        first, host=process_host(), pid=_exited_pid(), expires_in=60
    )
    await first.close()
    client = await connect(token)
    before = timezone.now()
    await client.send(
        {"type": "session.attach", "session_id": session["id"], "since_seq": await _last_seq(session["id"])}
    )
    attached = (await client.until("session.attached"))[-1]
    assert attached["pending_tool_calls"] == [
        {"tool_use_id": "toolu_c", "name": "client_lookup", "input": {"q": "toolu_c"}}
    ]
    # Taken over by the attach itself: the turn resumes now, not when the lease would end.
    assert before <= datetime.fromisoformat(attached["resumes_at"]) <= timezone.now()
    assert engine_runner.turn_running_here(turn.id)
    await client.send({"type": "tool.result", "tool_use_id": "toolu_c", "content": "found"})
    frames = await client.until("turn.completed", timeout=2)
    assert (frames[-1]["turn_id"], frames[-1]["stop_reason"]) == (str(turn.id), "end_turn")
    assert [f for f in frames if f["type"] == "error"] == []
    result = next(f for f in frames if f["type"] == "tool.result")
    assert (result["tool_use_id"], result["content"]) == ("toolu_c", "found")


async def test_a_result_sent_while_the_holder_elsewhere_keeps_its_lease_is_used_at_the_takeover(connect):
    from sessions_app.engine import repair

    client = await connect()
    # Its holder, on another host, stopped renewing: its lease runs out in a second.
    session, turn, expires = await _dead_turn_waiting_for_a_client(
        client, host="elsewhere", pid=_exited_pid(), expires_in=1.0
    )
    await client.send(
        {"type": "session.attach", "session_id": session["id"], "since_seq": await _last_seq(session["id"])}
    )
    attached = (await client.until("session.attached"))[-1]
    assert attached["pending_tool_calls"] == [
        {"tool_use_id": "toolu_c", "name": "client_lookup", "input": {"q": "toolu_c"}}
    ]
    assert datetime.fromisoformat(attached["resumes_at"]) == expires
    await client.send({"type": "tool.result", "tool_use_id": "toolu_c", "content": "kept"})
    # Kept, but nothing takes the turn over before the lease ends: no frame, no repair.
    assert await client.ws.receive_nothing(timeout=0.5)
    assert await repair.turns_sweep() == 0
    assert not engine_runner.turn_running_here(turn.id)
    await asyncio.sleep(max(0.0, (expires - timezone.now()).total_seconds()) + 0.05)
    assert await repair.turns_sweep() == 1
    frames = await client.until("turn.completed", timeout=2)
    assert frames[-1]["stop_reason"] == "end_turn"
    result = next(f for f in frames if f["type"] == "tool.result")
    assert (result["tool_use_id"], result["content"]) == ("toolu_c", "kept")


async def test_attach_while_the_holder_elsewhere_renews_its_lease_has_no_resumes_at(connect):
    client = await connect()
    session, _, _ = await _dead_turn_waiting_for_a_client(
        client, host="elsewhere", pid=os.getpid(), expires_in=55
    )
    await client.send(
        {"type": "session.attach", "session_id": session["id"], "since_seq": await _last_seq(session["id"])}
    )
    attached = (await client.until("session.attached"))[-1]
    assert [c["tool_use_id"] for c in attached["pending_tool_calls"]] == ["toolu_c"]
    assert "resumes_at" not in attached


async def test_attach_to_a_turn_running_here_lists_its_calls_without_resumes_at(connect):
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": 'tool client_lookup {"q": "x"}'})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "session.attach", "session_id": call["session_id"], "since_seq": call["seq"]})
    attached = (await client.until("session.attached"))[-1]
    assert attached["pending_tool_calls"] == [
        {"tool_use_id": call["tool_use_id"], "name": "client_lookup", "input": {"q": "x"}}
    ]
    assert "resumes_at" not in attached
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "here"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
