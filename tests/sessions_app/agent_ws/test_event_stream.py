"""The shared event stream of the websocket consumers: every seq, in order, none twice."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sessions_app.fastpath.channel_announcer import session_group_name
from sessions_app.models import AgentSession, SessionEvent

pytestmark = pytest.mark.django_db(transaction=True)


def events_written_elsewhere(session_id: uuid.UUID, count: int) -> list[dict]:
    """Events committed by another process whose broadcasts have not arrived here yet."""
    frames = []
    for _ in range(count):
        session = AgentSession.objects.get(pk=session_id)
        seq = session.last_seq + 1
        AgentSession.objects.filter(pk=session_id).update(last_seq=seq)
        event = SessionEvent.objects.create(session_id=session_id, seq=seq, type="usage", payload={"n": seq})
        frames.append(event.as_frame())
    return frames


async def test_a_broadcast_that_overtakes_earlier_ones_comes_after_them(connect):
    client = await connect()
    session_id = uuid.UUID((await client.create())["id"])
    frames = await sync_to_async(events_written_elsewhere)(session_id, 3)
    layer = get_channel_layer()
    await layer.group_send(session_group_name(str(session_id)), {"type": "session.event", "event": frames[2]})
    received = [await client.recv() for _ in range(3)]
    assert [f["seq"] for f in received] == [1, 2, 3]
    # The earlier broadcasts arrive late: nothing is sent twice.
    for frame in frames[:2]:
        await layer.group_send(session_group_name(str(session_id)), {"type": "session.event", "event": frame})
    assert await client.nothing_more()


async def test_a_writes_events_overtaking_earlier_ones_come_after_them(connect):
    """The same with the events of one write broadcast together (`session.events`): the gap
    before them is filled from the database, and a late, overlapping broadcast sends nothing
    twice."""
    client = await connect()
    session_id = uuid.UUID((await client.create())["id"])
    frames = await sync_to_async(events_written_elsewhere)(session_id, 5)
    layer = get_channel_layer()
    group = session_group_name(str(session_id))
    await layer.group_send(group, {"type": "session.events", "events": frames[3:]})
    received = [await client.recv() for _ in range(5)]
    assert [f["seq"] for f in received] == [1, 2, 3, 4, 5]
    await layer.group_send(group, {"type": "session.events", "events": frames[1:4]})
    assert await client.nothing_more()


async def test_a_writes_events_are_one_message_to_the_session_and_one_notice(transactional_db, monkeypatch):
    """A write's events reach the session's group as one message (each member woken once, not
    once an event), and the session list as one notice, of the last event it cares about (and,
    as it ends a turn, the dashboard's approvals count one bare notice); a write of many
    sessions' deltas is one message to each session, and no notice."""
    from sessions_app.fastpath import channel_announcer

    sent: list[tuple[str, dict]] = []

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            sent.append((group, message))

    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    write = [
        {"type": "assistant.delta", "session_id": a, "seq": 7, "text": "ok"},
        {"type": "assistant.message", "session_id": a, "seq": 8, "content": []},
        {"type": "usage", "session_id": a, "seq": 9},
        {"type": "turn.completed", "session_id": a, "seq": 10},
    ]
    monkeypatch.setattr(channel_announcer, "get_channel_layer", Layer)
    await sync_to_async(channel_announcer.announce_via_channel_layer)(write)
    await _outbox_drained()
    assert sent == [
        (session_group_name(a), {"type": "session.events", "events": write}),
        (channel_announcer.APPROVALS_GROUP, {"type": "approvals.changed"}),
        (
            channel_announcer.ALL_SESSIONS_GROUP,
            {"type": "session.notice", "session_id": a, "event_type": "turn.completed", "seq": 10},
        ),
    ]
    sent.clear()
    deltas = [
        {"type": "assistant.delta", "session_id": a, "seq": 11, "text": "x"},
        {"type": "assistant.delta", "session_id": b, "seq": 3, "text": "y"},
    ]
    await sync_to_async(channel_announcer.announce_via_channel_layer)(deltas)
    await _outbox_drained()
    assert sent == [
        (session_group_name(a), {"type": "session.events", "events": deltas[:1]}),
        (session_group_name(b), {"type": "session.events", "events": deltas[1:]}),
    ]


async def _outbox_drained() -> None:
    import asyncio

    from sessions_app.fastpath import channel_announcer

    for _ in range(100):
        outbox = channel_announcer._outboxes.get(asyncio.get_running_loop())
        if outbox is not None and not outbox.runs and not outbox.sending:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the outbox did not drain")


async def test_events_whose_broadcast_was_lost_reach_the_client_at_the_next_round(connect):
    """channels_redis may drop a broadcast (a consumer cancelled as it receives for the
    process): the process's round (`connections.streams_check`) finds the connection behind the
    database and it catches up, so a client never waits for ever on an event it was not told of."""
    from sessions_app.agent_ws import connections

    client = await connect()
    session_id = uuid.UUID((await client.create())["id"])
    await sync_to_async(events_written_elsewhere)(session_id, 2)  # no broadcast arrives
    assert await client.nothing_more()
    await connections.streams_check()
    received = [await client.recv() for _ in range(2)]
    assert [(f["seq"], f["type"]) for f in received] == [(1, "usage"), (2, "usage")]
    # A round with nothing behind sends nothing.
    await connections.streams_check()
    assert await client.nothing_more()
