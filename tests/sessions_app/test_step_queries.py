"""The step path's database work does not grow with the history: a one-step turn runs the same
queries at 10 and at 400 stored messages (a count, not a time)."""

from __future__ import annotations

import logging
import threading
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.db.backends.signals import connection_created

from sessions_app import services
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, Message

pytestmark = pytest.mark.django_db(transaction=True)


class _Queries(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sql: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        sql = getattr(record, "sql", None)
        if sql:
            self.sql.append(sql)


def _fill(session_id, messages: int) -> None:
    rows = [
        Message(
            session_id=session_id,
            position=p,
            epoch=0,
            role="user" if p % 2 == 0 else "assistant",
            content=[{"type": "text", "text": f"message {p}"}],
            token_estimate=estimate_json_tokens([{"type": "text", "text": f"message {p}"}]),
        )
        for p in range(messages)
    ]
    Message.objects.bulk_create(rows)
    AgentSession.objects.filter(pk=session_id).update(next_position=messages)


async def _turn_queries(history: int) -> list[str]:
    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    await sync_to_async(_fill)(session.id, history)
    await runner.turn_start(session_id=session.id, content="hello")  # loads and caches the history
    await runner.turns_wait_idle(timeout=60)
    handler = _Queries()
    backends = logging.getLogger("django.db.backends")
    level = backends.level
    backends.setLevel(logging.DEBUG)
    backends.addHandler(handler)
    try:
        await runner.turn_start(session_id=session.id, content="hello again")
        await runner.turns_wait_idle(timeout=60)
    finally:
        backends.removeHandler(handler)
        backends.setLevel(level)
    return handler.sql


async def test_a_one_step_turn_runs_as_many_queries_at_400_messages_as_at_10(settings):
    settings.DEBUG = True  # every connection, in every database thread, logs its queries
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 600  # no heartbeat query during the turn
    settings.PALIMPSEST_POLL_SECONDS = 600  # no poll of the waiting turns during it
    small = await _turn_queries(10)
    large = await _turn_queries(400)
    assert small, "no query was seen: the count below would prove nothing"
    assert len(large) == len(small), (len(small), len(large))


async def test_a_one_step_turn_opens_no_savepoint_and_reads_no_counter_back(settings):
    """Its writes nest (the events inside the turn's start, the call's record inside the step's
    store) without a savepoint each, and every seq or position comes back from its increment
    (`UPDATE ... RETURNING`). Two transactions: the turn's start, then its one step stored with
    the turn's end, each with one update of the session row, which is not read (17 statements
    where there were 62, then 45, then 30, then 23, then 21), plus one insert of each message's
    search document (`services.recall`, in the message's transaction)."""
    settings.DEBUG = True
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 600
    settings.PALIMPSEST_POLL_SECONDS = 600  # no poll of the waiting turns during it
    sql = await _turn_queries(10)
    assert sql, "no query was seen: the checks below would prove nothing"
    assert [q for q in sql if "SAVEPOINT" in q.upper()] == []
    counters = ('"last_seq"', '"next_position"')
    increments = [
        q
        for q in sql
        if q.startswith("UPDATE") and any(f"{c} = (" in q or f"{c} = {c}" in q for c in counters)
    ]
    assert len(increments) == 2, increments  # one per transaction: its message and its events
    assert all("RETURNING" in q for q in increments), increments
    read_back = [
        q for q in sql if q.startswith("SELECT") and any(f'."{c[1:-1]}" AS {c}' in q for c in counters)
    ]
    assert read_back == []
    assert len([q for q in sql if q.startswith("BEGIN")]) == 2
    assert [q for q in sql if '"sessions_app_requestpart"' in q] == []  # stored by the first turn
    assert len(sql) <= 17 + 2, len(sql)
    assert len([q for q in sql if '"sessions_app_recalldocument"' in q]) == 2
    assert not [q for q in sql if q.startswith("SELECT") and '"sessions_app_agentsession"' in q], sql


async def test_a_one_step_turn_opens_no_connection_outside_the_database_threads(settings):
    """The engine's database threads keep their connections; a thread of its own (`db_heavy`)
    opens and closes one per call, on PostgreSQL a new server backend: a usual message's fit
    check and a step without tool calls use none."""
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 600  # no heartbeat (its own thread) during the turn
    settings.PALIMPSEST_POLL_SECONDS = 600  # no poll of the waiting turns during it
    settings.PALIMPSEST_DB_THREADS = 4
    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    await sync_to_async(_fill)(session.id, 10)
    await runner.turn_start(session_id=session.id, content="hello")
    await runner.turns_wait_idle(timeout=60)
    opened: list[str] = []

    def created(sender, connection, **kwargs) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(created)
    try:
        await runner.turn_start(session_id=session.id, content="hello again")
        await runner.turns_wait_idle(timeout=60)
    finally:
        connection_created.disconnect(created)
    outside = [name for name in opened if not name.startswith("palimpsest-db")]
    assert outside == []


async def test_the_last_step_is_in_the_cached_history_before_its_turn_completed_is_announced(settings):
    """The last step and the turn's end are one transaction: once it commits, the client may
    start the next turn at once, in another database thread, from the same cached history. The
    answer must be in that history by then, not appended by the ending turn under the new one."""
    from sessions_app import announce
    from sessions_app.engine import history

    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    seen: list[tuple[int, int]] = []
    real = announce._announce

    def watching(frames: list[dict]) -> None:
        for frame in frames:
            if frame["type"] == "turn.completed":
                cached = history._histories.get(session.id)
                seen.append((frame["seq"], cached.last_position if cached is not None else -1))
        real(frames)

    with mock.patch.object(announce, "_announce", watching):
        await runner.turn_start(session_id=session.id, content="hello")
        await runner.turns_wait_idle(timeout=60)
    rows = Message.objects.filter(session_id=session.id).order_by("position").values_list("position", "role")
    stored: list[tuple[int, str]] = await sync_to_async(lambda: list(rows))()
    assert stored[-1][1] == "assistant"
    assert [last for _, last in seen] == [stored[-1][0]]


async def test_a_turns_heartbeats_share_one_connection(settings, monkeypatch):
    """The lease is renewed every lease/3 seconds on the process's lease thread, whose connection
    persists: not a new connection per renewal (on PostgreSQL, a new server backend each)."""
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 0.3  # a renewal every 0.1 s
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.05  # a turn of about a second
    beats = []
    real = services.turn_heartbeat

    def counted(**kwargs):
        beats.append(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(services, "turn_heartbeat", counted)
    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    opened: list[str] = []

    def created(sender, connection, **kwargs) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(created)
    try:
        # Echoed back in pieces of about 48 characters, one every 0.05 s.
        await runner.turn_start(session_id=session.id, content="word " * 200)
        await runner.turns_wait_idle(timeout=60)
    finally:
        connection_created.disconnect(created)
    assert len(beats) >= 3, beats
    assert {name.rsplit("_", 1)[0] for name in beats} == {"palimpsest-lease"}
    assert len([name for name in opened if name.startswith("palimpsest-lease")]) <= 1


async def test_a_turn_whose_cached_history_is_current_reads_no_message_and_counts_no_mask(settings):
    """Its start stores the user's message after the cached history's last one: that message is
    all that is new, so it is added as stored, without reading the history's new messages or
    counting its masks again; the history is the one the database holds."""
    from sessions_app.engine import history

    settings.DEBUG = True
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 600
    settings.PALIMPSEST_POLL_SECONDS = 600  # no poll of the waiting turns during it
    sql = await _turn_queries(10)
    assert sql, "no query was seen: the checks below would prove nothing"
    assert [q for q in sql if q.startswith("SELECT") and '"sessions_app_message"' in q] == []
    assert [q for q in sql if '"sessions_app_maskedresult"' in q] == []
    session_id = await sync_to_async(lambda: AgentSession.objects.latest("created_at").pk)()
    cached = history._histories.get(session_id)
    history.history_forget(session_id)
    fresh = await sync_to_async(history.history_for)(session_id, 0, feature_set=features())
    assert cached is not None and cached.last_position == fresh.last_position == 13
    assert cached.messages == fresh.messages
    assert cached.encoded_all() == fresh.encoded_all()


async def test_what_another_writer_stored_since_the_history_was_cached_is_read_again(settings):
    """A message stored by someone else between two turns (another process's turn, with a mask
    of an earlier result) breaks the run of positions: the next turn reads the new messages and
    the masks, and its request has both."""
    from sessions_app.engine import history
    from sessions_app.models import MaskedResult

    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    await sync_to_async(_fill)(session.id, 4)
    await runner.turn_start(session_id=session.id, content="hello")  # caches the history
    await runner.turns_wait_idle(timeout=60)

    def elsewhere() -> None:
        # What a turn of another process left: a tool call, its result, then a mask of it.
        position = AgentSession.objects.get(pk=session.id).next_position
        use = {"type": "tool_use", "id": "toolu_other", "name": "fs_read", "input": {}}
        result = {"type": "tool_result", "tool_use_id": "toolu_other", "content": "the whole file " * 20}
        for offset, (role, block) in enumerate([("assistant", use), ("user", result)]):
            Message.objects.create(
                session_id=session.id,
                position=position + offset,
                epoch=0,
                role=role,
                content=[block],
                token_estimate=estimate_json_tokens([block]),
            )
        AgentSession.objects.filter(pk=session.id).update(next_position=position + 2)
        MaskedResult.objects.create(
            session_id=session.id,
            epoch=0,
            tool_use_id="toolu_other",
            observation_id="obs_1",
            size_chars=300,
            placeholder="[masked elsewhere]",
        )

    await sync_to_async(elsewhere)()
    await runner.turn_start(session_id=session.id, content="and now?")
    await runner.turns_wait_idle(timeout=60)
    cached = history._histories.get(session.id)
    assert cached is not None
    shown = [b for m in cached.messages for b in m["content"] if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in shown] == ["toolu_other"]
    assert "[masked elsewhere]" in str(shown[0]["content"])
    stored = Message.objects.filter(session_id=session.id).order_by("position")
    positions = await sync_to_async(lambda: list(stored.values_list("position", flat=True)))()
    assert cached.last_position == positions[-1]
