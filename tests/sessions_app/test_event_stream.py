"""The shared event stream of the websocket consumers: every seq, in order, none twice."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sessions_app.channel_announcer import session_group_name
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
