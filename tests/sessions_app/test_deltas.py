"""Streamed text: a process's `assistant.delta` writes go together, one transaction for all the
turns streaming at once, and one turn's trouble is not the others'."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app import announce, services
from sessions_app.engine import deltas as engine_deltas
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, SessionEvent


@pytest.fixture
def announced(monkeypatch):
    frames: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: frames.extend)
    return frames


def _running(n: int) -> list[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]:
    """`n` sessions, each with a running turn: (session id, turn id, the lease's holder)."""
    turns = []
    for _ in range(n):
        session = engine_sessions.session_create(owner=None)
        holder = uuid.uuid4()
        turn = services.turn_begin(session_id=session.id, content="go", holder=holder)
        turns.append((session.id, turn.id, holder))
    return turns


def _deltas(session_id: uuid.UUID) -> list[tuple[int, str]]:
    return list(
        SessionEvent.objects.filter(session_id=session_id, type="assistant.delta")
        .order_by("seq")
        .values_list("seq", "payload__text")
    )


def test_many_turns_deltas_are_one_transaction(db, announced, django_capture_on_commit_callbacks):
    turns = _running(3)
    seqs = {s: AgentSession.objects.get(pk=s).last_seq for s, _, _ in turns}
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        written = services.turn_deltas_emit(
            deltas=[(s, t, h, f"text of {i}") for i, (s, t, h) in enumerate(turns)]
        )
    assert written == [True, True, True]
    assert len(callbacks) == 1  # one commit, one hand-over of all the frames
    for i, (session_id, _, _) in enumerate(turns):
        assert _deltas(session_id) == [(seqs[session_id] + 1, f"text of {i}")]
        assert AgentSession.objects.get(pk=session_id).last_seq == seqs[session_id] + 1
    assert sorted(f["text"] for f in announced if f["type"] == "assistant.delta") == [
        "text of 0",
        "text of 1",
        "text of 2",
    ]


def test_a_turn_without_its_lease_is_left_out_and_the_others_written(db, announced):
    """Another turn or another holder has the session, or the session is gone: nothing of that
    turn is written (False), the others are."""
    turns = _running(4)
    AgentSession.objects.filter(pk=turns[0][0]).update(lease_holder=uuid.uuid4())  # taken over
    AgentSession.objects.filter(pk=turns[1][0]).update(current_turn_id=uuid.uuid4())  # another turn
    before = {s: AgentSession.objects.get(pk=s).last_seq for s, _, _ in turns}
    gone = (uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    written = services.turn_deltas_emit(deltas=[(s, t, h, "x") for s, t, h in [*turns, gone]])
    assert written == [False, False, True, True, False]
    for session_id, _, _ in turns[:2]:
        assert _deltas(session_id) == []
        assert AgentSession.objects.get(pk=session_id).last_seq == before[session_id]
    for session_id, _, _ in turns[2:]:
        assert _deltas(session_id) == [(before[session_id] + 1, "x")]


class _SlowWrites:
    """`services.turn_deltas_emit`, each call recorded and held `pause` seconds first."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, pause: float, fail_for: set | None = None) -> None:
        self.batches: list[list[tuple]] = []
        self.lock = threading.Lock()
        real = services.turn_deltas_emit

        def write(*, deltas):
            with self.lock:
                self.batches.append(list(deltas))
            time.sleep(pause)
            if fail_for and any(d[0] in fail_for for d in deltas):
                raise RuntimeError("this session's write fails")
            return real(deltas=deltas)

        monkeypatch.setattr(services, "turn_deltas_emit", write)


async def test_deltas_waiting_meanwhile_go_in_the_next_transaction(transactional_db, monkeypatch, announced):
    """While one write is under way, the deltas of the other turns gather: they are written
    together in the next transaction, not one each."""
    turns = await sync_to_async(_running)(6)
    writes = _SlowWrites(monkeypatch, pause=0.2)
    first = asyncio.ensure_future(engine_deltas.delta_write(*turns[0], "first"))
    await asyncio.sleep(0.05)  # the first write is under way
    await asyncio.gather(
        first, *(engine_deltas.delta_write(s, t, h, f"text {i}") for i, (s, t, h) in enumerate(turns[1:]))
    )
    assert [len(batch) for batch in writes.batches] == [1, 5]
    for i, (session_id, _, _) in enumerate(turns[1:]):
        assert [text for _, text in await sync_to_async(_deltas)(session_id)] == [f"text {i}"]


async def test_one_turns_failed_write_does_not_fail_the_others(transactional_db, monkeypatch, announced):
    turns = await sync_to_async(_running)(3)
    writes = _SlowWrites(monkeypatch, pause=0.0, fail_for={turns[1][0]})
    results = await asyncio.gather(
        *(engine_deltas.delta_write(s, t, h, f"text {i}") for i, (s, t, h) in enumerate(turns)),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], RuntimeError)
    assert [text for _, text in await sync_to_async(_deltas)(turns[0][0])] == ["text 0"]
    assert await sync_to_async(_deltas)(turns[1][0]) == []
    assert [text for _, text in await sync_to_async(_deltas)(turns[2][0])] == ["text 2"]
    # The batch failed as a whole, then each went on its own.
    assert [len(batch) for batch in writes.batches][0] == 3
    assert sorted(len(batch) for batch in writes.batches[1:]) == [1, 1, 1]


async def test_a_lost_lease_is_the_callers_to_know(transactional_db, announced):
    ((session_id, turn_id, _),) = await sync_to_async(_running)(1)
    with pytest.raises(services.TurnLeaseLost):
        await engine_deltas.delta_write(session_id, turn_id, uuid.uuid4(), "not mine")
    assert await sync_to_async(_deltas)(session_id) == []


async def test_a_turn_streaming_keeps_its_deltas_in_order(transactional_db, monkeypatch, announced):
    """One turn's deltas, flushed one after the other through the shared writer, keep their
    order and their consecutive seqs."""
    monkeypatch.setattr(engine_deltas, "DELTA_FLUSH_SECONDS", 0.0)
    monkeypatch.setattr(engine_deltas, "DELTA_GATHER_SECONDS", 0.0)  # every piece written at once
    ((session_id, turn_id, holder),) = await sync_to_async(_running)(1)
    buffer = engine_deltas.DeltaBuffer(session_id, turn_id, holder)
    for i in range(5):
        await buffer.add(f"piece {i} ")
    assert await buffer.close() == ""
    stored = await sync_to_async(_deltas)(session_id)
    assert "".join(text for _, text in stored) == "".join(f"piece {i} " for i in range(5))
    assert [seq for seq, _ in stored] == list(range(stored[0][0], stored[0][0] + len(stored)))


async def test_text_that_came_during_a_slow_write_waits_for_the_pace_not_a_write_of_its_own(
    transactional_db, monkeypatch, announced
):
    """The pace counts from the end of the last write: with the database busy (the first write
    took longer than DELTA_FLUSH_SECONDS), the next piece is not written at once on its own; the
    end of the call takes it, to announce with the answer."""
    monkeypatch.setattr(engine_deltas, "DELTA_FLUSH_SECONDS", 0.1)
    monkeypatch.setattr(engine_deltas, "DELTA_GATHER_SECONDS", 0.01)
    ((session_id, turn_id, holder),) = await sync_to_async(_running)(1)
    writes = _SlowWrites(monkeypatch, pause=0.3)
    buffer = engine_deltas.DeltaBuffer(session_id, turn_id, holder)
    buffer.last_flush -= 1  # the model took its time before the first text: written once gathered
    await buffer.add("ok, ")
    for _ in range(100):  # the gathering is over and the write under way
        if writes.batches:
            break
        await asyncio.sleep(0.01)
    await buffer.add("done.")  # while the first write waits on the database
    await asyncio.sleep(0.05)  # its gathering is over too: it waits for the write, then the pace
    assert await buffer.close() == "done."
    assert [[d[3] for d in batch] for batch in writes.batches] == [["ok, "]]
    assert [text for _, text in await sync_to_async(_deltas)(session_id)] == ["ok, "]


async def test_an_answer_that_arrives_whole_goes_with_the_step_not_in_a_delta_of_its_own(
    transactional_db, monkeypatch, announced
):
    """The first text after a pause waits DELTA_GATHER_SECONDS for what came with it: the rest
    of a short answer, streamed in one burst, is all there when the call ends, and the caller
    writes it with the step (one write, not a delta's and then the step's)."""
    ((session_id, turn_id, holder),) = await sync_to_async(_running)(1)
    writes = _SlowWrites(monkeypatch, pause=0)
    buffer = engine_deltas.DeltaBuffer(session_id, turn_id, holder)
    buffer.last_flush -= 1  # the model took its time before its answer
    for piece in ("ok", ", ", "done."):
        await buffer.add(piece)
    assert await buffer.close() == "ok, done."
    assert writes.batches == []


async def test_the_first_text_after_a_pause_is_written_once_its_gathering_is_over(
    transactional_db, monkeypatch, announced
):
    """A model that goes on streaming: its first text is written DELTA_GATHER_SECONDS after it
    came (not held for the pace), then the rest at the pace."""
    monkeypatch.setattr(engine_deltas, "DELTA_GATHER_SECONDS", 0.02)
    monkeypatch.setattr(engine_deltas, "DELTA_FLUSH_SECONDS", 30.0)  # no second write in this test
    ((session_id, turn_id, holder),) = await sync_to_async(_running)(1)
    buffer = engine_deltas.DeltaBuffer(session_id, turn_id, holder)
    buffer.last_flush -= 60  # the pace allows a write at once
    await buffer.add("first")
    for _ in range(200):
        if await sync_to_async(_deltas)(session_id):
            break
        await asyncio.sleep(0.02)
    assert [text for _, text in await sync_to_async(_deltas)(session_id)] == ["first"]
    await buffer.add(" then more")  # within the pace of that write: waits for the end of the call
    assert await buffer.close() == " then more"


async def test_a_piece_waiting_for_the_pace_is_written_by_the_timer(transactional_db, monkeypatch, announced):
    monkeypatch.setattr(engine_deltas, "DELTA_FLUSH_SECONDS", 0.05)
    ((session_id, turn_id, holder),) = await sync_to_async(_running)(1)
    buffer = engine_deltas.DeltaBuffer(session_id, turn_id, holder)
    await buffer.add("waiting")
    for _ in range(100):  # the model stalls; the timer writes what waits
        if await sync_to_async(_deltas)(session_id):
            break
        await asyncio.sleep(0.05)
    assert [text for _, text in await sync_to_async(_deltas)(session_id)] == ["waiting"]
    assert await buffer.close() == ""


@pytest.mark.services
def test_batches_over_the_same_sessions_at_once_do_not_wait_on_each_other(transactional_db):
    """Two processes' writers batch the same sessions' deltas in opposite orders: the rows are
    locked in one order whatever the batch's, so neither waits for the other's locks (on
    PostgreSQL, rows locked in opposite orders would deadlock), and every delta is written with
    gapless seqs."""
    from django.db import connections

    turns = _running(12)
    errors: list[BaseException] = []

    def writer(order: list, label: str) -> None:
        try:
            for round_ in range(10):
                assert services.turn_deltas_emit(
                    deltas=[(s, t, h, f"{label}{round_}") for s, t, h in order]
                ) == [True] * len(order)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=writer, args=(turns, "a")),
        threading.Thread(target=writer, args=(list(reversed(turns)), "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for session_id, _, _ in turns:
        stored = _deltas(session_id)
        assert len(stored) == 20
        assert [seq for seq, _ in stored] == list(range(stored[0][0], stored[0][0] + 20))


async def test_a_stopped_writer_leaves_no_turn_waiting(transactional_db, monkeypatch, announced):
    """The writer's task is cancelled (its event loop closing) during a write: the turns whose
    deltas it held are told at once, none waits for ever."""
    turns = await sync_to_async(_running)(3)
    _SlowWrites(monkeypatch, pause=0.5)
    first = asyncio.ensure_future(engine_deltas.delta_write(*turns[0], "first"))
    await asyncio.sleep(0.1)  # the first write is under way; the others wait behind it
    queued = [asyncio.ensure_future(engine_deltas.delta_write(s, t, h, "later")) for s, t, h in turns[1:]]
    await asyncio.sleep(0)
    (writer,) = [task for task in asyncio.all_tasks() if task.get_name() == "palimpsest-deltas"]
    writer.cancel()
    results = await asyncio.wait_for(asyncio.gather(first, *queued, return_exceptions=True), 2)
    assert all(isinstance(result, asyncio.CancelledError) for result in results)
    await asyncio.sleep(0.6)  # the abandoned write's thread finishes before the test's database goes
