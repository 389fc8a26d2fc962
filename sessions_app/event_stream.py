"""Following one session's events over a websocket, in `seq` order, missing none.

Shared by the agent websocket and the dashboard's: join the session's channel-layer group, replay
what was stored after `since_seq`, then take broadcasts, filling from the database any gap that
broadcasts from several processes may leave. What is sent for the events is the consumer's own
(`deliver_events`: JSON frames for agents, HTML fragments for the dashboard).

Sends are flow-controlled (`ws_flow`): a replay is read from the database a page at a time and
each page is sent only as fast as the client reads, so a large session's replay is never queued
whole for a client that does not read.
"""

from __future__ import annotations

import uuid
from typing import Any

from channels.db import database_sync_to_async

from sessions_app import selectors
from sessions_app.channel_announcer import session_group_name
from sessions_app.ws_flow import FlowControlledSend

# Events read from the database at once for a replay (a page is sent before the next is read).
REPLAY_PAGE_EVENTS = 100


class SessionEventStream(FlowControlledSend):
    """Mixin for an `AsyncWebsocketConsumer` that follows one session at a time."""

    channel_layer: Any
    channel_name: str
    session_id: uuid.UUID | None = None
    last_sent_seq: int = 0

    async def deliver_events(self, events: list[dict]) -> None:
        """Send `events` (new, consecutive, in order) to the client."""
        raise NotImplementedError

    async def stream_join(self, session_id: uuid.UUID, *, since_seq: int) -> None:
        """Follow `session_id` from `since_seq` on (call `stream_replay` to catch up)."""
        await self.stream_leave()
        self.session_id = session_id
        self.last_sent_seq = since_seq
        if self.channel_layer is not None:
            await self.channel_layer.group_add(session_group_name(str(session_id)), self.channel_name)

    async def stream_leave(self) -> None:
        if self.session_id is not None and self.channel_layer is not None:
            await self.channel_layer.group_discard(
                session_group_name(str(self.session_id)), self.channel_name
            )

    async def stream_replay(self) -> None:
        """Send every stored event after the last one sent, page by page, until caught up.

        Each page (REPLAY_PAGE_EVENTS events) is read from the database only once the previous
        one is sent, and sending waits while the client is not reading; the replay stops if the
        connection is closed meanwhile. Broadcasts of events written meanwhile are queued behind
        the caller and arrive after it, where `session_event` drops what was replayed already.
        """
        while await self.flow_wait_writable():
            events = await self._stored_after(self.last_sent_seq, limit=REPLAY_PAGE_EVENTS)
            if not events:
                return
            await self._deliver(events)

    async def session_event(self, message: dict) -> None:
        """A committed event broadcast to the session's group."""
        event = message["event"]
        if self.session_id is None or event["session_id"] != str(self.session_id):
            return
        seq = event["seq"]
        if seq <= self.last_sent_seq:
            return  # replayed from the database already
        # Broadcasts from two processes can overtake each other: fill the gap from the database
        # so the client sees every seq, in order.
        while seq > self.last_sent_seq + 1:
            missing = await self._stored_after(self.last_sent_seq, upto_seq=seq - 1)
            if not missing:
                break
            await self._deliver(missing)
        await self._deliver([event])

    async def _stored_after(
        self, after_seq: int, *, upto_seq: int | None = None, limit: int = REPLAY_PAGE_EVENTS
    ) -> list[dict]:
        assert self.session_id is not None
        return await database_sync_to_async(selectors.session_events_after)(
            session_id=self.session_id, after_seq=after_seq, upto_seq=upto_seq, limit=limit
        )

    async def _deliver(self, events: list[dict]) -> None:
        fresh = [event for event in events if event["seq"] > self.last_sent_seq]
        if fresh:
            self.last_sent_seq = fresh[-1]["seq"]
            await self.deliver_events(fresh)
