"""Frames are judged as they arrive (issue 31, item 5): a frame over the frame quota, or past the
connection's backlog, is answered `rate_limited` at once, without waiting for the handling of the
frames before it; a client that keeps going is closed (4429); what waits is bounded in frames and
bytes, and a flood's memory is given back. Each test holds the handling of a first frame back
(its handler waits on an event) and counts the answers that come meanwhile."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc

import pytest

from sessions_app.agent_ws import quotas
from sessions_app.agent_ws.consumer import AgentConsumer
from sessions_app.agent_ws.intake import frame_size
from sessions_app.agent_ws.quotas import CLOSE_TOO_MANY_CONNECTIONS, RateLimiter

pytestmark = pytest.mark.django_db(transaction=True)


class Held:
    """`session.get`'s handling waits until `release()`; `entered` is set once the first waits."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = asyncio.Event()
        self.released = asyncio.Event()
        self.handled = 0
        real = AgentConsumer.on_session_get
        held = self

        async def on_session_get(consumer: AgentConsumer, frame: dict, request_id: object) -> None:
            held.entered.set()
            await held.released.wait()
            held.handled += 1
            await real(consumer, frame, request_id)

        monkeypatch.setattr(AgentConsumer, "on_session_get", on_session_get)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Held:
    return Held(monkeypatch)


@pytest.fixture
def frozen_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame quota's clock stands still: no allowance refills during a test."""
    monkeypatch.setattr(quotas, "_frames", RateLimiter(period_seconds=1.0, clock=lambda: 0.0))


async def _answers_while_held(client, held: Held) -> list[dict]:
    """Every frame answered while the first frame's handling is held back."""
    replies = []
    while not await client.ws.receive_nothing(timeout=0.3):
        replies.append(await client.recv())
    assert held.handled == 0
    return replies


async def _first_frame_held(client, held: Held) -> None:
    await client.send({"type": "session.get", "request_id": "first"})
    await asyncio.wait_for(held.entered.wait(), 5)


async def test_frames_over_the_quota_are_refused_without_waiting_for_earlier_frames(
    connect, held, frozen_quota, settings
):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 10
    client = await connect()
    await _first_frame_held(client, held)  # spends one of the 10
    for n in range(30):
        await client.send({"type": "session.get", "request_id": n})
    refused = await _answers_while_held(client, held)
    assert [(r["code"], r["request_id"]) for r in refused] == [("rate_limited", n) for n in range(9, 30)]
    held.release()
    answered = [await client.recv() for _ in range(10)]
    assert [(r["code"], r["request_id"]) for r in answered] == [("not_attached", "first")] + [
        ("not_attached", n) for n in range(9)
    ]
    assert await client.nothing_more()
    await client.close()


async def test_frames_past_the_backlog_are_refused_at_once(connect, held, settings):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 0  # the quota is not what this is about
    settings.PALIMPSEST_WS_BACKLOG_FRAMES = 8
    client = await connect()
    await _first_frame_held(client, held)
    for n in range(30):
        await client.send({"type": "session.get", "request_id": n})
    refused = await _answers_while_held(client, held)
    assert [(r["code"], r["request_id"]) for r in refused] == [("rate_limited", n) for n in range(8, 30)]
    assert "at most 8 frames" in refused[0]["message"]
    held.release()
    answered = [await client.recv() for _ in range(9)]
    assert [r["request_id"] for r in answered] == ["first", *range(8)]
    await client.close()


async def test_the_backlog_is_bounded_in_bytes(connect, held, settings):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 0
    settings.PALIMPSEST_WS_BACKLOG_BYTES = 20_000
    client = await connect()
    await _first_frame_held(client, held)
    frames = [json.dumps({"type": "session.get", "request_id": n, "pad": "x" * 3000}) for n in range(20)]
    size = frame_size({"text": frames[0]})
    room = 20_000 // size  # frames of that size the backlog holds
    assert 1 < room < 20
    for frame in frames:
        await client.send(frame)
    refused = await _answers_while_held(client, held)
    assert [(r["code"], r["request_id"]) for r in refused] == [("rate_limited", n) for n in range(room, 20)]
    held.release()
    answered = [await client.recv() for _ in range(1 + room)]
    assert [r["request_id"] for r in answered] == ["first", *range(room)]
    await client.close()


async def test_a_client_that_keeps_sending_over_its_limits_is_closed_with_4429(
    connect, held, frozen_quota, settings
):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 1
    settings.PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE = 5
    client = await connect()
    await _first_frame_held(client, held)
    for n in range(20):
        await client.send({"type": "session.get", "request_id": n})
    outputs = []
    while True:
        output = await client.ws.receive_output(timeout=3)
        outputs.append(output)
        if output["type"] == "websocket.close":
            break
    codes = [json.loads(o["text"])["code"] for o in outputs[:-1]]
    assert codes == ["rate_limited"] * 5
    assert outputs[-1] == {"type": "websocket.close", "code": CLOSE_TOO_MANY_CONNECTIONS}
    held.release()


HOSTILE_FRAMES = 400
HOSTILE_FRAME_CHARS = 200_000


async def test_a_flood_of_large_frames_keeps_under_1_mb_per_100_frames(connect, held, settings):
    """200 KB frames sent without pause while the first frame's handling is held back: the
    backlog holds a bounded part of them, the rest are refused at once, and once the client is
    gone the server keeps under 1 MB per 100 hostile frames (Python's own allocations,
    tracemalloc)."""
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 0
    settings.PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE = 0  # every refusal answered, none closes
    settings.PALIMPSEST_WS_BACKLOG_BYTES = 2 * 1024 * 1024
    client = await connect()
    await _first_frame_held(client, held)
    pad = "x" * HOSTILE_FRAME_CHARS
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(HOSTILE_FRAMES):
            # A new text each time, as frames read off a socket are.
            await client.send(json.dumps({"type": "session.get", "request_id": n, "pad": pad}))
        refused = await _answers_while_held(client, held)
        peak_waiting = tracemalloc.get_traced_memory()[0] - before
        held.release()
        while not await client.ws.receive_nothing(timeout=0.3):
            await client.recv()
        await client.close()
        del refused
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_100 = kept * 100 / HOSTILE_FRAMES
    print(f"\nkept {kept} bytes after {HOSTILE_FRAMES} frames: {per_100 / 1e6:.3f} MB per 100 frames")
    print(f"held while the frames waited: {peak_waiting / 1e6:.1f} MB")
    assert per_100 < 1_000_000
    # While they waited, the backlog (2 MB) and the frames in flight, not all 80 MB of them.
    assert peak_waiting < 10 * 1024 * 1024
