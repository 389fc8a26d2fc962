"""Following a session's events over a websocket, in `seq` order, missing none.

Shared by the agent websocket and the dashboard's: join the session's channel-layer group, replay
what was stored after `since_seq`, then take broadcasts, filling from the database any gap that
broadcasts from several processes may leave. What is sent for the events is the consumer's own
(`deliver_events`: JSON frames for agents, HTML fragments for the dashboard).

Sends are flow-controlled (`flow`): a replay is read from the database a page at a time and
each page is sent only as fast as the client reads, so a large session's replay is never queued
whole for a client that does not read.

A connection may follow more sessions than the one it is attached to (`stream_follow`), each
with its own `seq`: an agent client sees the events of the attached session's sub-sessions
(PROTOCOL.md v1.1). With `follow_children`, each child a followed session announces
(`session.spawned`) is followed too, from its first event, so no child's event is missed
whichever process runs it.
"""

from __future__ import annotations

import uuid
from typing import Any

from channels.db import database_sync_to_async

from sessions_app import selectors
from sessions_app.agent_ws.flow import FlowControlledSend
from sessions_app.fastpath.channel_announcer import session_group_name

# Events read from the database at once for a replay (a page is sent before the next is read).
REPLAY_PAGE_EVENTS = 100
SPAWNED_EVENT = "session.spawned"


class SessionEventStream(FlowControlledSend):
    """Mixin for an `AsyncWebsocketConsumer` that follows one session at a time (and, for agent
    clients, its sub-sessions)."""

    channel_layer: Any
    channel_name: str
    session_id: uuid.UUID | None = None
    last_sent_seq: int = 0
    # Follow the children that followed sessions spawn (agent clients; the dashboard shows one
    # session per page).
    follow_children: bool = False

    async def deliver_events(self, events: list[dict]) -> None:
        """Send `events` (new, consecutive, of one session, in order) to the client."""
        raise NotImplementedError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The sessions followed besides the attached one: id → the last seq sent of it.
        self._followed: dict[uuid.UUID, int] = {}
        # Where to start a session followed later (a client's `since_seqs`); 0 when not named.
        self._since_hints: dict[uuid.UUID, int] = {}
        # Sub-sessions deliberately not followed (yet): their `session.spawned` does not follow
        # them (an agent client's attach follows a bounded page of a large tree).
        self._held_back: set[uuid.UUID] = set()

    @property
    def followed_seqs(self) -> dict[uuid.UUID, int]:
        """The sessions followed besides the attached one, with the last seq sent of each."""
        return dict(self._followed)

    def stream_seqs(self) -> dict[uuid.UUID, int]:
        """Every session followed (the attached one included), with the last seq sent of each."""
        seqs = dict(self._followed)
        if self.session_id is not None:
            seqs[self.session_id] = self.last_sent_seq
        return seqs

    async def stream_behind(self, session_ids: list[uuid.UUID]) -> None:
        """The database holds events of `session_ids` newer than what was sent (a broadcast
        may be lost: channels_redis can drop a message when another consumer of the process is
        cancelled as it receives): ask this consumer, in its own order of handling, to catch up
        from the database (`stream_catch_up`)."""
        await self.channel_layer.send(
            self.channel_name, {"type": "stream.catch_up", "session_ids": [str(s) for s in session_ids]}
        )

    async def stream_catch_up(self, message: dict) -> None:
        """Replay what the database holds after the last seq sent, for each session named that
        is still followed (nothing is sent twice: what a late broadcast brings after is dropped)."""
        for raw in message.get("session_ids", []):
            try:
                session_id = uuid.UUID(str(raw))
            except ValueError:
                continue
            if self._last_seq(session_id) is not None:
                await self.stream_replay(session_id)

    async def stream_join(self, session_id: uuid.UUID, *, since_seq: int) -> None:
        """Follow `session_id` from `since_seq` on (call `stream_replay` to catch up)."""
        await self.stream_leave()
        self.session_id = session_id
        self.last_sent_seq = since_seq
        if self.channel_layer is not None:
            await self.channel_layer.group_add(session_group_name(str(session_id)), self.channel_name)

    async def stream_follow(self, session_id: uuid.UUID, *, since_seq: int | None = None) -> bool:
        """Also follow `session_id`, from `since_seq` on (default: the hint given to
        `stream_hint`, else its first event); call `stream_replay(session_id)` to catch up.
        False when it is followed already."""
        if session_id == self.session_id or session_id in self._followed:
            return False
        start = since_seq if since_seq is not None else self._since_hints.get(session_id, 0)
        self._held_back.discard(session_id)
        self._followed[session_id] = start
        if self.channel_layer is not None:
            await self.channel_layer.group_add(session_group_name(str(session_id)), self.channel_name)
        return True

    def stream_hint(self, since_seqs: dict[uuid.UUID, int]) -> None:
        """Where to start each session that `stream_follow` will follow without a `since_seq`."""
        self._since_hints.update(since_seqs)

    def stream_hold_back(self, session_ids: list[uuid.UUID]) -> None:
        """Do not follow these sessions when a followed session announces them (`session.spawned`
        in a replay): only `stream_follow` follows them."""
        self._held_back.update(session_ids)

    async def stream_leave(self) -> None:
        if self.channel_layer is not None:
            followed = [self.session_id, *self._followed] if self.session_id is not None else []
            for session_id in followed:
                await self.channel_layer.group_discard(session_group_name(str(session_id)), self.channel_name)
        self._followed.clear()
        self._since_hints.clear()
        self._held_back.clear()

    def _last_seq(self, session_id: uuid.UUID) -> int | None:
        if session_id == self.session_id:
            return self.last_sent_seq
        return self._followed.get(session_id)

    async def stream_replay(self, session_id: uuid.UUID | None = None) -> None:
        """Send every stored event of a followed session (the attached one by default) after the
        last one sent, page by page, until caught up.

        Each page (REPLAY_PAGE_EVENTS events) is read from the database only once the previous
        one is sent, and sending waits while the client is not reading; the replay stops if the
        connection is closed meanwhile. Broadcasts of events written meanwhile are queued behind
        the caller and arrive after it, where `session_event` drops what was replayed already.
        """
        target = session_id or self.session_id
        assert target is not None
        while await self.flow_wait_writable():
            last = self._last_seq(target)
            if last is None:
                return
            events = await self._stored_after(target, last, limit=REPLAY_PAGE_EVENTS)
            if not events:
                return
            await self._deliver(target, events)

    async def session_events(self, message: dict) -> None:
        """Committed events broadcast to a followed session's group: one session's, consecutive,
        in `seq` order (the events of one write, `channel_announcer`)."""
        events = message["events"]
        if not events:
            return
        try:
            session_id = uuid.UUID(str(events[0]["session_id"]))
        except ValueError:
            return
        last = self._last_seq(session_id)
        if last is None or events[-1]["seq"] <= last:
            return  # not followed, or replayed from the database already
        # Broadcasts from two processes can overtake each other: fill the gap from the database
        # so the client sees every seq, in order.
        first = events[0]["seq"]
        while first > (self._last_seq(session_id) or 0) + 1:
            missing = await self._stored_after(
                session_id, self._last_seq(session_id) or 0, upto_seq=first - 1
            )
            if not missing:
                break
            await self._deliver(session_id, missing)
        await self._deliver(session_id, events)

    async def session_event(self, message: dict) -> None:
        """One committed event: what a process of an earlier version broadcasts (its events one
        message each), during a rolling upgrade over Redis."""
        await self.session_events({"events": [message["event"]]})

    async def _stored_after(
        self,
        session_id: uuid.UUID,
        after_seq: int,
        *,
        upto_seq: int | None = None,
        limit: int = REPLAY_PAGE_EVENTS,
    ) -> list[dict]:
        return await database_sync_to_async(selectors.session_events_after)(
            session_id=session_id, after_seq=after_seq, upto_seq=upto_seq, limit=limit
        )

    async def _deliver(self, session_id: uuid.UUID, events: list[dict]) -> None:
        last = self._last_seq(session_id)
        if last is None:
            return
        fresh = [event for event in events if event["seq"] > last]
        if not fresh:
            return
        if session_id == self.session_id:
            self.last_sent_seq = fresh[-1]["seq"]
        else:
            self._followed[session_id] = fresh[-1]["seq"]
        await self.deliver_events(fresh)
        if self.follow_children:
            for event in fresh:
                if event["type"] == SPAWNED_EVENT:
                    child_id = uuid.UUID(str(event["child_session_id"]))
                    if child_id in self._held_back:
                        continue
                    if await self.stream_follow(child_id):
                        await self.stream_replay(child_id)
