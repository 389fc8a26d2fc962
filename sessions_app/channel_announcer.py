"""Broadcasts committed session events to the session's channel-layer group.

Every event goes to its session's group (agent clients, the operator's session page). All but
the frequent `assistant.delta` also go, as a small notice (session id, type, seq: no payload), to
one global group that the dashboard's session list watches.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import deque
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger("palimpsest.announce")

ALL_SESSIONS_GROUP = "sessions.all"
# Streamed text changes nothing the session list shows; the message that follows it does.
NOT_NOTICED = frozenset({"assistant.delta"})


def session_group_name(session_id: str) -> str:
    return f"session.{session_id.replace('-', '')}"


async def _broadcast(layer: Any, frame: dict) -> None:
    await layer.group_send(session_group_name(frame["session_id"]), {"type": "session.event", "event": frame})
    if frame["type"] not in NOT_NOTICED:
        await layer.group_send(
            ALL_SESSIONS_GROUP,
            {
                "type": "session.notice",
                "session_id": frame["session_id"],
                "event_type": frame["type"],
                "seq": frame["seq"],
            },
        )


class _Outbox:
    """A process's broadcasts waiting to be sent by its event loop, in the order they were
    committed, by one task at a time."""

    def __init__(self) -> None:
        self.frames: deque[tuple[Any, dict]] = deque()
        self.sending = False

    def put(self, layer: Any, frames: list[dict]) -> None:  # runs in the loop
        self.frames.extend((layer, frame) for frame in frames)
        if not self.sending:
            self.sending = True
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self.frames:
                layer, frame = self.frames.popleft()
                try:
                    await _broadcast(layer, frame)
                except Exception:
                    # Committed and replayable with since_seq: a failed broadcast loses nothing.
                    logger.exception(
                        "broadcasting event %s seq %s failed", frame.get("type"), frame.get("seq")
                    )
        finally:
            self.sending = False


_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Outbox] = weakref.WeakKeyDictionary()
_outboxes_lock = threading.Lock()


def announce_via_channel_layer(frames: list[dict]) -> None:
    """Broadcast the committed events of one write. From a database thread of the server
    (`sync_to_async`), the frames are handed to the event loop (one hand-over for all of them)
    without waiting: a write's thread does not stand idle while the loop, busy with every other
    session, gets round to the broadcast. Frames keep their order (one outbox per loop, drained
    by one task); elsewhere, the sends are awaited."""
    layer = get_channel_layer()
    if layer is None:
        return
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    if loop is not None and loop.is_running() and not _in_loop_thread(loop):
        with _outboxes_lock:
            outbox = _outboxes.get(loop)
            if outbox is None:
                outbox = _outboxes[loop] = _Outbox()
        loop.call_soon_threadsafe(outbox.put, layer, frames)
        return
    async_to_sync(_broadcast_all)(layer, frames)


async def _broadcast_all(layer: Any, frames: list[dict]) -> None:
    for frame in frames:
        await _broadcast(layer, frame)


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
