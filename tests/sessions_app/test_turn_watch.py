"""The poll of a process's waiting turns: what another process wrote (a cancel, a lease taken
over) is read for all of them with one query a round, and only the turns it concerns look."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.engine import runner as engine_runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession

LONG_ANSWER = "echo " + " ".join(f"w{i}" for i in range(300))  # ~15 s at 0.5 s a piece


class Calls:
    """Counts the calls of a service (made in the database threads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str, fail: bool = False) -> None:
        self.args: list[dict] = []
        self.lock = threading.Lock()
        real = getattr(services, name)

        def counted(**kwargs):
            with self.lock:
                self.args.append(kwargs)
            if fail:
                raise RuntimeError("the database is away")
            return real(**kwargs)

        monkeypatch.setattr(services, name, counted)

    def __len__(self) -> int:
        with self.lock:
            return len(self.args)


async def _waiting_turns(connect, n: int) -> tuple[list, list[str]]:
    """`n` clients and their sessions, each with a turn waiting on a long, slow answer (its
    first text is out)."""
    clients, ids = [], []
    for _ in range(n):
        client = await connect()
        ids.append((await client.create())["id"])
        await client.send({"type": "user.message", "content": LONG_ANSWER})
        clients.append(client)
    for client in clients:
        await client.until("assistant.delta", timeout=5)
    return clients, ids


def _cancel_as_another_process(session_id: str) -> None:
    """The cancel another process accepts: stored, and no wake-up reaches this process."""
    services.turn_cancel_request(session_id=uuid.UUID(session_id))


async def test_waiting_turns_are_polled_with_one_query_a_round(connect, monkeypatch, settings):
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.5
    settings.PALIMPSEST_POLL_SECONDS = 0.05
    clients, ids = await _waiting_turns(connect, 5)
    asked = Calls(monkeypatch, "turns_stop_asked")
    each = Calls(monkeypatch, "turn_is_cancelled")
    await asyncio.sleep(0.6)  # about twelve rounds
    rounds = len(asked)
    assert 4 <= rounds <= 20
    assert all({str(s) for s, _, _ in call["turns"]} == set(ids) for call in asked.args)
    assert len(each) == 0  # no turn was woken to look: nothing was asked of any

    # Another process cancels the second turn: the next round wakes it (and it alone), it looks,
    # and its turn ends cancelled mid-answer.
    await sync_to_async(_cancel_as_another_process)(ids[1])
    frames = await clients[1].until("turn.completed", timeout=3)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert "assistant.message" not in [f["type"] for f in frames]
    # Only the cancelled turn looked: the others were not woken.
    assert [call["session_id"] for call in each.args] == [uuid.UUID(ids[1])]
    for client in (clients[0], *clients[2:]):
        await client.send({"type": "turn.cancel"})
        frames = await client.until("turn.completed", timeout=3)
        assert frames[-1]["stop_reason"] == "cancelled"
    for client in clients:
        await client.close()


async def test_a_turn_taken_over_elsewhere_is_woken_and_stops(connect, monkeypatch, settings):
    """Another process took the turn's lease (its holder changed): the poll wakes the runner,
    which finds it lost the lease and writes nothing more."""
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.5
    (client,), (session_id,) = await _waiting_turns(connect, 1)
    stop = asyncio.Event()
    real = engine_runner.TurnRunner.check_stop

    async def check_stop(self):
        try:
            await real(self)
        except services.TurnLeaseLost:
            stop.set()
            raise

    monkeypatch.setattr(engine_runner.TurnRunner, "check_stop", check_stop)
    await sync_to_async(
        lambda: AgentSession.objects.filter(pk=session_id).update(lease_holder=uuid.uuid4())
    )()
    await asyncio.wait_for(stop.wait(), 3)
    await engine_runner.turns_wait_idle(timeout=5)
    await client.close()


async def test_a_failed_poll_lets_each_turn_look_for_itself(connect, monkeypatch, settings, caplog):
    """The poll's query fails (a locked database): every waiting turn looks for itself that
    round, so a cancel from another process still stops its turn."""
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.5
    (client,), (session_id,) = await _waiting_turns(connect, 1)
    asked = Calls(monkeypatch, "turns_stop_asked", fail=True)
    await sync_to_async(_cancel_as_another_process)(session_id)
    frames = await client.until("turn.completed", timeout=3)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert len(asked) >= 1
    assert "polling the running turns failed" in caplog.text
    await client.close()


@pytest.mark.django_db
def test_turns_stop_asked_names_the_turns_that_must_look():
    """Cancel asked, lease taken by another holder or another turn, session gone: named; a turn
    still leased as it was: not. Two runners of one session are told apart by their holder."""
    holders = [uuid.uuid4() for _ in range(4)]
    sessions = [engine_sessions.session_create(owner=None) for _ in range(4)]
    turns = [
        (s.id, services.turn_begin(session_id=s.id, content="go", holder=h).id, h)
        for s, h in zip(sessions, holders, strict=True)
    ]
    stalled = (turns[3][0], turns[3][1], uuid.uuid4())  # an older runner of the fourth's turn
    assert services.turns_stop_asked(turns=[*turns, stalled]) == {stalled}
    services.turn_cancel_request(session_id=sessions[0].id)
    AgentSession.objects.filter(pk=sessions[1].id).update(lease_holder=uuid.uuid4())
    AgentSession.objects.filter(pk=sessions[2].id).update(current_turn_id=uuid.uuid4())
    gone = (uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    assert services.turns_stop_asked(turns=[*turns, gone]) == {*turns[:3], gone}


@pytest.mark.django_db
def test_turns_stop_asked_reads_many_sessions_in_chunks(monkeypatch):
    monkeypatch.setattr("sessions_app.services.turns.STOP_ASKED_CHUNK", 3)
    sessions = [engine_sessions.session_create(owner=None) for _ in range(7)]
    turns = []
    for s in sessions:
        holder = uuid.uuid4()
        turns.append((s.id, services.turn_begin(session_id=s.id, content="go", holder=holder).id, holder))
    services.turn_cancel_request(session_id=sessions[6].id)
    assert services.turns_stop_asked(turns=turns) == {turns[6]}
