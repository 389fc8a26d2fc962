"""Flow control of websocket sends: what a client does not read is not queued without bound.

An ASGI `send` never blocks: under daphne, every frame a consumer sends is appended to Twisted's
write buffer for the connection, so a client that stops reading (while asking for replays of a
large session, or while a busy session streams) made the server hold everything it was sent.

Here each connection registers a push producer on daphne's protocol (Twisted's own flow-control
interface: `pauseProducing` when more than the transport's buffer size, 64 KiB, waits beyond the
kernel's socket buffers; `resumeProducing` once it is written; `stopProducing` when the
connection is lost). While paused, a send waits for the client to read; a client that does not
within `PALIMPSEST_WS_DRAIN_SECONDS` is closed with `CLOSE_SLOW_CONSUMER` (4408). So a
connection holds at most about 64 KiB plus one frame beyond the kernel's buffers.

Under a server other than daphne (or Channels' test communicator) there is no transport to
watch and sends are not paced. How the transport is found behind an ASGI `send` (daphne's and
Channels' objects looked into) is in `fastpath/compat.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from django.conf import settings

from sessions_app.fastpath.compat import daphne_protocol, transport_producer

logger = logging.getLogger("palimpsest.ws")

CLOSE_SLOW_CONSUMER = 4408


class TransportWatch:
    """A Twisted streaming producer that records whether the client keeps up.

    While the client does not read, the connection is not read either (the transport's own
    `pauseProducing`): a client cannot pile up frames in the server's input queue while it
    leaves the answers unread, its own socket fills up instead.

    Daphne's HTTP channel registered itself as the TCP transport's producer before the upgrade
    to a websocket and stays registered; the watch takes its place and passes every call on to
    it, so whatever it did on a full buffer it still does.
    """

    def __init__(self, previous: Any = None, transport: Any = None) -> None:
        self.previous = previous
        self.transport = transport
        self.paused = False
        self.stopped = False
        self._writable = asyncio.Event()
        self._writable.set()

    # Twisted's IPushProducer, called on the event loop's thread (daphne runs Twisted on asyncio).
    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.paused = True
        self._writable.clear()
        if self.previous is not None:
            self.previous.pauseProducing()
        if self.transport is not None:
            self.transport.pauseProducing()  # stop reading the client's frames meanwhile

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False
        self._writable.set()
        if self.previous is not None:
            self.previous.resumeProducing()
        if self.transport is not None and not self.stopped:
            self.transport.resumeProducing()

    def stopProducing(self) -> None:  # noqa: N802
        self.stopped = True
        self._writable.set()
        if self.previous is not None:
            self.previous.stopProducing()

    async def wait_writable(self, timeout: float) -> bool:
        """True once the client has read what was buffered (or the connection is gone)."""
        if not self.paused:
            return True
        try:
            await asyncio.wait_for(self._writable.wait(), timeout)
        except TimeoutError:
            return False
        return True


def transport_watch_attach(send: Any) -> TransportWatch | None:
    """Watch the connection behind an ASGI `send`; None where it cannot be watched."""
    protocol = daphne_protocol(send)
    transport = getattr(protocol, "transport", None)
    if transport is None or not callable(getattr(transport, "registerProducer", None)):
        return None
    previous, streaming = transport_producer(transport)
    if previous is not None and not streaming:
        return None  # a pull producer: not ours to chain
    reading = transport if callable(getattr(transport, "pauseProducing", None)) else None
    watch = TransportWatch(previous, reading)
    if previous is not None:
        transport.unregisterProducer()
    try:
        transport.registerProducer(watch, True)
    except RuntimeError:
        return None
    return watch


class FlowControlledSend:
    """Mixin for an `AsyncWebsocketConsumer`: `send` waits while the client is not reading.

    A client that does not read for `PALIMPSEST_WS_DRAIN_SECONDS` while something waits to be
    sent is closed with 4408, and nothing more is sent or handled on that connection
    (`flow_closed`).
    """

    base_send: Any
    flow_closed: bool = False
    _flow_watch: TransportWatch | None = None
    _flow_started: bool = False

    def _flow_watch_get(self) -> TransportWatch | None:
        if not self._flow_started:
            self._flow_started = True
            self._flow_watch = transport_watch_attach(self.base_send)
        return self._flow_watch

    async def flow_wait_writable(self) -> bool:
        """Wait until the client can take more; False when this connection is closed or gone."""
        if self.flow_closed:
            return False
        watch = self._flow_watch_get()
        if watch is None:
            return True
        if watch.stopped:
            return False
        if await watch.wait_writable(settings.PALIMPSEST_WS_DRAIN_SECONDS):
            return not watch.stopped
        await self.flow_close_slow_consumer()
        return False

    async def flow_close_slow_consumer(self) -> None:
        if self.flow_closed:
            return
        self.flow_closed = True
        logger.warning(
            "closing a websocket whose client read nothing for %s s (code %s)",
            settings.PALIMPSEST_WS_DRAIN_SECONDS,
            CLOSE_SLOW_CONSUMER,
        )
        with contextlib.suppress(Exception):
            await self.close(code=CLOSE_SLOW_CONSUMER)  # type: ignore[attr-defined]

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool | int = False
    ) -> None:
        if not await self.flow_wait_writable():
            return
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)  # type: ignore[misc]
