"""What a client sends is judged as it arrives, not once its turn to be handled comes.

Channels hands a consumer one message at a time: the next frame is read from the ASGI `receive`
only when the previous one's handling has finished, and meanwhile the server (daphne) keeps every
frame the client sends in the connection's input queue, without bound. A client sending faster
than its frames were handled built a backlog there: frames counted against the frame quota only
when handled (so a flood never looked over the quota), answered many seconds late, and held in
memory meanwhile (issue 31, item 5).

`FrameIntake` stands between the server's `receive` and the consumer (an ASGI `receive` wrapped,
as ASGI middleware wraps it): one task reads every message as soon as it arrives and asks the
consumer's `judge` about each client frame there and then. A frame over the quota, or one the
connection's backlog has no room for (`PALIMPSEST_WS_BACKLOG_FRAMES` frames or
`PALIMPSEST_WS_BACKLOG_BYTES` waiting), is refused at once (`refuse`: the consumer answers
`rate_limited`, and closes a connection that keeps going) and dropped; the others wait in a
queue bounded by those settings. A frame is always let in when none waits, so one frame as large
as `PALIMPSEST_MAX_FRAME_BYTES` still goes through. When the client disconnects, what waits is
dropped: nobody is left to answer.

Imports nothing of Channels: it is plain ASGI.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

Message = dict[str, Any]
RECEIVE = "websocket.receive"
DISCONNECT = "websocket.disconnect"


def frame_size(message: Message) -> int:
    """The memory a received frame holds (its text or bytes object's own size)."""
    data = message.get("text")
    if data is None:
        data = message.get("bytes")
    return sys.getsizeof(data) if data is not None else 0


class FrameIntake:
    """An ASGI `receive` for the consumer, fed by a task that reads the server's as fast as the
    client sends.

    `judge(message)` is called for each client frame as it arrives: None lets it in, a reason
    (a string) refuses it. `refuse(message, reason)` is then awaited, on the reading task, before
    the next message is read (sends wait while the client does not read: `flow`; meanwhile the
    client's own frames are not read either). Everything else (connect, disconnect) passes in
    order.
    """

    def __init__(
        self,
        receive: Callable[[], Awaitable[Message]],
        *,
        judge: Callable[[Message], str | None],
        refuse: Callable[[Message, str], Awaitable[None]],
    ) -> None:
        self._receive = receive
        self._judge = judge
        self._refuse = refuse
        self._waiting: deque[tuple[Message, int]] = deque()
        self._waiting_bytes = 0
        self._arrived = asyncio.Event()
        self._reader: asyncio.Task | None = None
        self._failure: BaseException | None = None
        self._ended = False

    # -- what the consumer sees -----------------------------------------------------
    async def receive(self) -> Message:
        """The next message let in, in the order the client sent them."""
        if self._reader is None:
            self._reader = asyncio.ensure_future(self._read())
        while not self._waiting:
            if self._failure is not None:
                raise self._failure
            self._arrived.clear()
            await self._arrived.wait()
        message, size = self._waiting.popleft()
        self._waiting_bytes -= size
        return message

    @property
    def waiting(self) -> int:
        """Client frames received and not yet taken for handling."""
        return sum(1 for message, _ in self._waiting if message["type"] == RECEIVE)

    @property
    def waiting_bytes(self) -> int:
        return self._waiting_bytes

    def room_for(self, message: Message) -> bool:
        """Whether the backlog may take `message` (always, when no frame waits)."""
        if not self._waiting:
            return True
        if len(self._waiting) >= settings.PALIMPSEST_WS_BACKLOG_FRAMES:
            return False
        return self._waiting_bytes + frame_size(message) <= settings.PALIMPSEST_WS_BACKLOG_BYTES

    async def stop(self) -> None:
        """Stop reading (the consumer has ended) and drop whatever waits."""
        self._ended = True
        self._drop_waiting()
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    # -- the reading task --------------------------------------------------------------
    async def _read(self) -> None:
        try:
            while not self._ended:
                message = await self._receive()
                if message["type"] == RECEIVE:
                    reason = self._judge(message)
                    if reason is not None:
                        await self._refuse(message, reason)
                        continue
                    self._let_in(message, frame_size(message))
                    continue
                if message["type"] == DISCONNECT:
                    # Nobody is left to answer what waits: give its memory back now.
                    self._drop_waiting()
                    self._let_in(message, 0)
                    return
                self._let_in(message, 0)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the consumer, as its own receive would raise it
            self._failure = exc
            self._arrived.set()

    def _let_in(self, message: Message, size: int) -> None:
        self._waiting.append((message, size))
        self._waiting_bytes += size
        self._arrived.set()

    def _drop_waiting(self) -> None:
        self._waiting = deque(item for item in self._waiting if item[0]["type"] != RECEIVE)
        self._waiting_bytes = 0
