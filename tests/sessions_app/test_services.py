"""Services: tokens, events and their announcement, the turn lease."""

from __future__ import annotations

import contextvars
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from sessions_app import announce, services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, AgentToken, Message, SessionEvent, Turn


@pytest.fixture
def announced(monkeypatch):
    frames: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: frames.extend)
    return frames


@pytest.fixture
def session(db):
    return engine_sessions.session_create(owner=None)


# -- sessions --------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_new_session_that_names_no_threshold_gets_the_servers_default(settings):
    settings.PALIMPSEST_COMPACT_THRESHOLD = 0.6
    assert engine_sessions.session_create(owner=None).compact_threshold == 0.6


@pytest.mark.django_db
def test_a_threshold_the_session_names_wins_over_the_servers_default(settings):
    settings.PALIMPSEST_COMPACT_THRESHOLD = 0.6
    assert engine_sessions.session_create(owner=None, compact_threshold=0.9).compact_threshold == 0.9


# -- tokens ----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_token_is_stored_only_as_a_hash():
    token, raw = services.agent_token_create(name="bot")
    assert raw.startswith("pal_") and len(raw) > 40
    row = AgentToken.objects.get(pk=token.pk)
    assert raw not in (row.token_hash, row.prefix, row.name)
    assert row.token_hash == services.agent_token_hash(raw)
    assert services.agent_token_authenticate(raw=raw) == token


@pytest.mark.django_db
def test_authenticate_refreshes_last_used_and_refuses_revoked():
    token, raw = services.agent_token_create(name="bot")
    used = services.agent_token_authenticate(raw=raw)
    assert used is not None and used.last_used_at is not None
    services.agent_token_revoke(token=token)
    assert services.agent_token_authenticate(raw=raw) is None
    assert services.agent_token_authenticate(raw="") is None


@pytest.mark.django_db
def test_create_agent_token_prints_token_as_last_line(capsys):
    call_command("create_agent_token", "worker-1")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    token = services.agent_token_authenticate(raw=raw)
    assert token is not None and token.name == "worker-1"


# -- events ----------------------------------------------------------------------------------
def test_events_get_consecutive_seq_from_one(session, announced, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for index in range(3):
            services.event_emit(session_id=session.id, type="test", payload={"i": index})
    assert list(SessionEvent.objects.values_list("seq", flat=True)) == [1, 2, 3]
    assert [f["seq"] for f in announced] == [1, 2, 3]
    assert announced[0] == {
        "type": "test",
        "session_id": str(session.id),
        "seq": 1,
        "ts": announced[0]["ts"],
        "i": 0,
    }


def test_rolled_back_event_is_neither_stored_nor_announced_and_leaves_no_gap(
    session, announced, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            services.event_emit(session_id=session.id, type="doomed", payload={})
            raise RuntimeError
        services.event_emit(session_id=session.id, type="kept", payload={})
    assert list(SessionEvent.objects.values_list("seq", "type")) == [(1, "kept")]
    assert [f["type"] for f in announced] == ["kept"]


def test_announcement_waits_for_commit(session, announced, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.event_emit(session_id=session.id, type="pending", payload={})
        assert announced == []
    for callback in callbacks:
        callback()
    assert [f["type"] for f in announced] == ["pending"]


def test_failing_announcer_does_not_fail_the_write(session, monkeypatch, django_capture_on_commit_callbacks):
    def broken(frames):
        raise ConnectionError("layer down")

    monkeypatch.setattr(announce, "_announcer", lambda: broken)
    with django_capture_on_commit_callbacks(execute=True):
        services.event_emit(session_id=session.id, type="still", payload={})
    assert SessionEvent.objects.filter(type="still").exists()


def _emit_concurrently(session_id, writers: int, each: int) -> None:
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(each):
                services.event_emit(session_id=session_id, type="race", payload={})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_gapless_seq():
    session = engine_sessions.session_create(owner=None)
    _emit_concurrently(session.id, writers=4, each=25)
    seqs = sorted(SessionEvent.objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, 101))


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_gapless_seq_on_postgresql():
    assert connection.vendor == "postgresql"
    session = engine_sessions.session_create(owner=None)
    _emit_concurrently(session.id, writers=8, each=25)
    seqs = sorted(SessionEvent.objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, 201))


# -- the turn lease --------------------------------------------------------------------------
def test_second_turn_is_refused_while_the_lease_holds(session, announced):
    services.turn_begin(session_id=session.id, content="one")
    with pytest.raises(services.TurnInProgress):
        services.turn_begin(session_id=session.id, content="two")
    assert Message.objects.filter(session=session).count() == 1


def test_expired_lease_lets_a_new_turn_in_and_repairs_the_history(session, announced):
    first = services.turn_begin(session_id=session.id, content="one")
    services.assistant_step_store(
        session_id=session.id,
        turn_id=first.id,
        epoch=0,
        content=[{"type": "tool_use", "id": "toolu_lost", "name": "t", "input": {}}],
        call=_call_data(),
        tool_calls=[],
    )
    # The process running the turn died: its lease runs out.
    AgentSession.objects.filter(pk=session.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    second = services.turn_begin(session_id=session.id, content="two")
    roles = list(Message.objects.filter(session=session).values_list("role", "content"))
    assert roles[2] == (
        "user",
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_lost",
                "content": services.INTERRUPTED_TOOL_RESULT,
                "is_error": True,
            }
        ],
    )
    assert roles[3] == ("user", [{"type": "text", "text": "two"}])
    assert Turn.objects.get(pk=first.id).stop_reason == "error"
    assert AgentSession.objects.get(pk=session.id).current_turn_id == second.id


def test_heartbeat_extends_only_the_holders_lease(session, announced):
    turn = services.turn_begin(session_id=session.id, content="one")
    assert services.turn_heartbeat(session_id=session.id, turn_id=turn.id)
    assert not services.turn_heartbeat(session_id=session.id, turn_id=Turn(session=session).id)


def test_finish_releases_the_lease_and_announces(session, announced, django_capture_on_commit_callbacks):
    turn = services.turn_begin(session_id=session.id, content="one")
    with django_capture_on_commit_callbacks(execute=True):
        services.turn_finish(session_id=session.id, turn_id=turn.id, stop_reason="end_turn", steps=1)
    refreshed = AgentSession.objects.get(pk=session.id)
    assert (refreshed.current_turn_id, refreshed.lease_expires_at, refreshed.status) == (None, None, "idle")
    assert announced[-1]["type"] == "turn.completed"
    services.turn_begin(session_id=session.id, content="two")


def test_cancel_request_needs_a_running_turn(session, announced):
    with pytest.raises(services.NoTurnInProgress):
        services.turn_cancel_request(session_id=session.id)
    turn = services.turn_begin(session_id=session.id, content="one")
    assert services.turn_cancel_request(session_id=session.id) == turn.id
    assert services.turn_is_cancelled(session_id=session.id, turn_id=turn.id)


def _call_data() -> services.ModelCallData:
    return services.ModelCallData(
        provider="scripted",
        model="scripted",
        step=1,
        purpose="turn",
        request_record={"messages": []},
        request_sha256="0" * 64,
        request_bytes=2,
        stable_prefix_bytes=0,
        estimated_prompt_tokens=1,
        started_at=timezone.now(),
        duration_ms=1,
        first_token_ms=None,
        response=None,
        stop_reason="tool_use",
        usage={"input_tokens": 5, "output_tokens": 2},
    )


def test_a_turn_that_lost_its_lease_writes_nothing(session, announced):
    first = services.turn_begin(session_id=session.id, content="one")
    AgentSession.objects.filter(pk=session.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.turn_begin(session_id=session.id, content="two")
    before = (Message.objects.count(), SessionEvent.objects.count())
    with pytest.raises(services.TurnLeaseLost):
        services.assistant_step_store(
            session_id=session.id,
            turn_id=first.id,
            epoch=0,
            content=[{"type": "text", "text": "late"}],
            call=_call_data(),
            tool_calls=[],
        )
    with pytest.raises(services.TurnLeaseLost):
        services.tool_results_store(session_id=session.id, turn_id=first.id, epoch=0, outcomes=[])
    with pytest.raises(services.TurnLeaseLost):
        services.turn_is_cancelled(session_id=session.id, turn_id=first.id)
    assert (Message.objects.count(), SessionEvent.objects.count()) == before


def _last_step(session, turn, **kwargs):
    return services.assistant_step_store_last(
        session_id=session.id,
        turn_id=turn.id,
        epoch=0,
        content=[{"type": "text", "text": "done"}],
        call=_call_data(),
        steps=1,
        **kwargs,
    )


def _logged(fn):
    """`fn()`'s result and the statements it ran (on this thread's connection)."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        result = fn()
    return result, [q["sql"] for q in captured.captured_queries]


def test_the_last_step_given_the_rows_ratio_checks_the_row_in_its_update(session, announced):
    """With the session's token ratio as the runner read it, the last step's store updates the
    row first, on the condition that it still has this turn's lease, no cancel and that ratio:
    the row is not read before; the turn ends as without it."""
    turn = services.turn_begin(session_id=session.id, content="one")
    (message, stop_reason), sql = _logged(lambda: _last_step(session, turn, token_ratio=1.0))
    assert (message.content, stop_reason) == ([{"type": "text", "text": "done"}], "end_turn")
    table = f'"{AgentSession._meta.db_table}"'
    assert not [q for q in sql if q.startswith("SELECT") and table in q], sql
    updates = [q for q in sql if q.startswith("UPDATE") and table in q]
    assert len(updates) == 1 and '"cancel_requested" = ' in updates[0].split(" WHERE ")[-1]
    row = AgentSession.objects.get(pk=session.id)
    assert (row.current_turn_id, row.status, row.next_position) == (None, "idle", 2)
    assert Turn.objects.get(pk=turn.id).stop_reason == "end_turn"
    last = SessionEvent.objects.filter(session_id=session.id).latest("seq")
    assert (last.type, last.seq, last.payload["stop_reason"]) == ("turn.completed", row.last_seq, "end_turn")


def test_the_last_step_reads_the_row_when_it_is_not_as_the_runner_read_it(session, announced):
    """A cancel accepted since, another ratio (the row's is used), a lease taken by another turn:
    the conditional update writes nothing, and the store goes on as without the ratio."""
    turn = services.turn_begin(session_id=session.id, content="one")
    AgentSession.objects.filter(pk=session.id).update(token_ratio=2.0)
    message, stop_reason = _last_step(session, turn, token_ratio=1.0)
    assert stop_reason == "end_turn" and message is not None
    # The row's ratio 2.0 blended with this call's 5 (5 tokens against an estimate of 1): 3.5,
    # where the runner's 1.0 would have given 3.0.
    assert AgentSession.objects.get(pk=session.id).token_ratio == pytest.approx(3.5)

    turn = services.turn_begin(session_id=session.id, content="cancel me")
    services.turn_cancel_request(session_id=session.id)
    message, stop_reason = _last_step(session, turn, token_ratio=3.5)
    assert stop_reason == "cancelled" and message is not None
    assert Turn.objects.get(pk=turn.id).stop_reason == "cancelled"

    first = services.turn_begin(session_id=session.id, content="two")
    AgentSession.objects.filter(pk=session.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.turn_begin(session_id=session.id, content="three")
    before = (Message.objects.count(), SessionEvent.objects.count(), AgentSession.objects.get(pk=session.id))
    with pytest.raises(services.TurnLeaseLost), transaction.atomic():  # the test's own savepoint
        _last_step(session, first, token_ratio=3.0)
    after = AgentSession.objects.get(pk=session.id)
    assert (Message.objects.count(), SessionEvent.objects.count()) == before[:2]
    assert (after.last_seq, after.next_position, after.usage_model_calls) == (
        before[2].last_seq,
        before[2].next_position,
        before[2].usage_model_calls,
    )


def test_the_last_step_of_a_turn_whose_holder_changed_writes_nothing(session, announced):
    """The same turn, its lease taken over by another runner (a repair): this task's holder is
    not the row's, so its conditional update matches nothing, and the locked read refuses."""
    import uuid

    holder = uuid.uuid4()
    turn = services.turn_begin(session_id=session.id, content="one", holder=holder)
    AgentSession.objects.filter(pk=session.id).update(lease_holder=uuid.uuid4())

    def as_the_old_runner() -> None:
        services.lease_hold(session_id=session.id, holder=holder)  # in this context only
        with pytest.raises(services.TurnLeaseLost), transaction.atomic():
            _last_step(session, turn, token_ratio=1.0)

    contextvars.copy_context().run(as_the_old_runner)
    assert Turn.objects.get(pk=turn.id).ended_at is None


def test_the_usual_start_reads_the_row_from_its_update_as_a_locked_read_would(db, announced):
    """An idle session's turn starts with one update of its row, which also reads it back: the
    row `admit` gets has the values a locked read gives (decoded JSON, keys, the notepad), and no
    statement reads the row before the update."""

    tools = [{"name": "lookup", "description": "Find it.", "input_schema": {"type": "object"}}]
    session = engine_sessions.session_create(
        owner=None,
        model="scripted",
        system_prompt="You help. ü",
        context_window=50_000,
        tools=tools,
        settings={"notepad": {"enabled": True}},
    )
    AgentSession.objects.filter(pk=session.id).update(notepad="remember ü", token_ratio=1.25, epoch=3)
    seen: list[AgentSession] = []
    turn, sql = _logged(lambda: services.turn_begin(session_id=session.id, content="hi", admit=seen.append))
    table = f'"{AgentSession._meta.db_table}"'
    assert [q for q in sql if table in q][0].startswith("UPDATE")
    assert not [q for q in sql if q.startswith("SELECT") and table in q], sql
    expected = AgentSession.objects.get(pk=session.id)
    assert features().snapshot(seen[0], with_notepad=True) == features().snapshot(expected, with_notepad=True)
    assert (seen[0].current_turn_id, seen[0].status, seen[0].lease_holder) == (
        turn.id,
        "running",
        expected.lease_holder,
    )
    assert Message.objects.get(session_id=session.id).epoch == 3


def test_a_refused_start_leaves_the_row_as_it_was(session, announced):
    """`admit` refuses after the row's update: the update is rolled back with the rest."""
    before = AgentSession.objects.filter(pk=session.id).values().get()

    def refuse(row: AgentSession) -> None:
        raise ValueError("too long")

    with pytest.raises(ValueError), transaction.atomic():
        services.turn_begin(session_id=session.id, content="hi", admit=refuse)
    assert AgentSession.objects.filter(pk=session.id).values().get() == before
    assert (Turn.objects.count(), Message.objects.count(), SessionEvent.objects.count()) == (0, 0, 0)


def test_a_start_after_a_failed_turn_reads_and_locks_the_row_first(session, announced):
    """Not idle (the last turn ended in an error): the conditional update changes nothing, and
    the start reads the row under its lock, as a row with a turn does, then begins as usual."""
    AgentSession.objects.filter(pk=session.id).update(status="error")
    turn, sql = _logged(lambda: services.turn_begin(session_id=session.id, content="again"))
    table = f'"{AgentSession._meta.db_table}"'
    assert [q.split()[0] for q in sql if table in q] == ["UPDATE", "SELECT", "UPDATE"]
    row = AgentSession.objects.get(pk=session.id)
    assert (row.current_turn_id, row.status, row.next_position) == (turn.id, "running", 1)


def test_a_start_never_takes_a_held_lease_whatever_the_status_says(session, announced):
    """A turn holds the lease of a row marked idle (an admin's edit): the start is refused, as
    for a running row, and the row keeps its turn."""
    first = services.turn_begin(session_id=session.id, content="one")
    AgentSession.objects.filter(pk=session.id).update(status="idle")
    with pytest.raises(services.TurnInProgress), transaction.atomic():
        services.turn_begin(session_id=session.id, content="two")
    assert AgentSession.objects.get(pk=session.id).current_turn_id == first.id


def test_compaction_refuses_an_empty_summary(session):
    with pytest.raises(ValueError):
        services.compaction_store(
            session_id=session.id,
            turn_id=None,
            epoch=0,
            summary="  ",
            summary_message="  ",
            tokens_before=1,
            tokens_after=1,
        )
    assert AgentSession.objects.get(pk=session.id).epoch == 0
