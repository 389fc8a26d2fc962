"""Broadcasts committed session events to the session's channel-layer group.

Every event goes to its session's group (agent clients, the operator's session page). All but
the frequent `assistant.delta` also go, as a small notice (session id, type, seq: no payload), to
one global group that the dashboard's session list watches. A write that may change how many tool
calls wait for an approval (one asked, one answered, a turn ended) also sends a bare notice to
the group every dashboard page's socket joins, for the top bar's count.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import deque
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.fastpath.compat import sync_thread_event_loop

logger = logging.getLogger("palimpsest.announce")

ALL_SESSIONS_GROUP = "sessions.all"
APPROVALS_GROUP = "approvals.all"
# The events after which the count of calls waiting for an approval may differ.
APPROVAL_COUNT_EVENTS = frozenset({"tool.approval_requested", "tool.approval_answered", "turn.completed"})
# Streamed text changes nothing the session list shows; the message that follows it does.
NOT_NOTICED = frozenset({"assistant.delta"})


def session_group_name(session_id: str) -> str:
    return f"session.{session_id.replace('-', '')}"


async def _broadcast(layer: Any, frames: list[dict]) -> None:
    """Send one session's consecutive events (of one write) to its group as one message, and
    one notice of the last of them the session list cares about: a write's four events were
    seven group sends, each waking every member (a consumer's turn through its handler, the
    operator's page rendering each on its own)."""
    session_id = frames[0]["session_id"]
    await layer.group_send(session_group_name(session_id), {"type": "session.events", "events": frames})
    noticed = [frame for frame in frames if frame["type"] not in NOT_NOTICED]
    if any(frame["type"] in APPROVAL_COUNT_EVENTS for frame in frames):
        await layer.group_send(APPROVALS_GROUP, {"type": "approvals.changed"})
    if noticed:
        await layer.group_send(
            ALL_SESSIONS_GROUP,
            {
                "type": "session.notice",
                "session_id": session_id,
                "event_type": noticed[-1]["type"],
                "seq": noticed[-1]["seq"],
            },
        )


def _by_session(frames: list[dict]) -> list[list[dict]]:
    """`frames` (in commit order) cut into runs of one session's (a write of many sessions'
    deltas has one frame of each)."""
    runs: list[list[dict]] = []
    for frame in frames:
        if runs and runs[-1][0]["session_id"] == frame["session_id"]:
            runs[-1].append(frame)
        else:
            runs.append([frame])
    return runs


class _Outbox:
    """A process's broadcasts waiting to be sent by its event loop, in the order they were
    committed, by one task at a time."""

    def __init__(self) -> None:
        self.runs: deque[tuple[Any, list[dict]]] = deque()
        self.sending = False

    def put(self, layer: Any, frames: list[dict]) -> None:  # runs in the loop
        self.runs.extend((layer, run) for run in _by_session(frames))
        if not self.sending:
            self.sending = True
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self.runs:
                layer, run = self.runs.popleft()
                try:
                    await _broadcast(layer, run)
                except Exception:
                    # Committed and replayable with since_seq: a failed broadcast loses nothing.
                    logger.exception(
                        "broadcasting events %s failed",
                        ", ".join(f"{f.get('type')} seq {f.get('seq')}" for f in run),
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
    loop = sync_thread_event_loop()
    if loop is not None and loop.is_running() and not _in_loop_thread(loop):
        with _outboxes_lock:
            outbox = _outboxes.get(loop)
            if outbox is None:
                outbox = _outboxes[loop] = _Outbox()
        loop.call_soon_threadsafe(outbox.put, layer, frames)
        return
    async_to_sync(_broadcast_all)(layer, frames)


async def _broadcast_all(layer: Any, frames: list[dict]) -> None:
    for run in _by_session(frames):
        await _broadcast(layer, run)


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
