"""Flow control of websocket sends (the transport watch stands in for daphne's TCP transport)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from sessions_app.agent_ws import flow
from sessions_app.agent_ws.flow import CLOSE_SLOW_CONSUMER, TransportWatch, transport_watch_attach

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def watches(monkeypatch) -> list[TransportWatch]:
    """Every connection gets a watch the test can pause and resume."""
    made: list[TransportWatch] = []

    def attach(send: object) -> TransportWatch:
        made.append(TransportWatch())
        return made[-1]

    monkeypatch.setattr(flow, "transport_watch_attach", attach)
    return made


async def test_sends_wait_while_the_client_is_not_reading(connect, watches, settings):
    settings.PALIMPSEST_WS_DRAIN_SECONDS = 5
    client = await connect()
    await client.create()
    watches[-1].pauseProducing()
    await client.send({"type": "session.get", "request_id": "g"})
    assert await client.nothing_more()  # held back, not queued
    watches[-1].resumeProducing()
    assert (await client.recv())["request_id"] == "g"
    await client.close()


async def test_a_client_that_does_not_read_in_time_is_closed_with_4408(connect, watches, settings):
    settings.PALIMPSEST_WS_DRAIN_SECONDS = 0.2
    client = await connect()
    await client.create()
    watches[-1].pauseProducing()
    await client.send({"type": "user.message", "content": "hello"})
    assert await client.ws.receive_output(timeout=3) == {
        "type": "websocket.close",
        "code": CLOSE_SLOW_CONSUMER,
    }
    # Nothing more is sent or handled on that connection.
    watches[-1].resumeProducing()
    await client.send({"type": "session.get"})
    assert await client.nothing_more()


class _Transport:
    def __init__(self, producer: object = None) -> None:
        self.producer = producer
        self.streamingProducer = True

    def registerProducer(self, producer: object, streaming: bool) -> None:  # noqa: N802
        if self.producer is not None:
            raise RuntimeError("a producer is registered")
        self.producer = producer

    def unregisterProducer(self) -> None:  # noqa: N802
        self.producer = None


class _Protocol:
    def __init__(self, transport: _Transport) -> None:
        self.transport = transport

    def registerProducer(self, producer: object, streaming: bool) -> None:  # noqa: N802
        self.transport.registerProducer(producer, streaming)


class _HTTPChannel:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pauseProducing(self) -> None:  # noqa: N802
        self.calls.append("pause")

    def resumeProducing(self) -> None:  # noqa: N802
        self.calls.append("resume")

    def stopProducing(self) -> None:  # noqa: N802
        self.calls.append("stop")


async def _handle_reply(protocol: object, message: dict) -> None:
    pass


def test_the_watch_takes_the_place_of_the_http_channel_and_passes_calls_on():
    channel = _HTTPChannel()
    transport = _Transport(producer=channel)
    send = functools.partial(_handle_reply, _Protocol(transport))
    watch = transport_watch_attach(send)
    assert watch is not None and transport.producer is watch
    watch.pauseProducing()
    watch.resumeProducing()
    watch.stopProducing()
    assert channel.calls == ["pause", "resume", "stop"]
    assert watch.stopped


def test_the_watch_finds_daphnes_protocol_behind_the_session_middleware():
    transport = _Transport()

    class SessionWrapper:  # what Channels' session middleware wraps `send` in
        def __init__(self, real_send: object) -> None:
            self.real_send = real_send

        async def send(self, message: dict) -> None:
            pass

    send = SessionWrapper(functools.partial(_handle_reply, _Protocol(transport))).send
    assert transport_watch_attach(send) is transport.producer is not None


def test_other_servers_are_not_watched():
    async def plain_send(message: dict) -> None:
        pass

    assert transport_watch_attach(plain_send) is None


async def test_wait_writable_times_out_while_paused():
    watch = TransportWatch()
    watch.pauseProducing()
    assert not await watch.wait_writable(0.05)
    asyncio.get_running_loop().call_later(0.05, watch.resumeProducing)
    assert await watch.wait_writable(1)
