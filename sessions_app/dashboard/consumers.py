"""The dashboard's websockets: rendered HTML fragments for htmx's `ws` extension.

- `ws/dashboard/sessions/<uuid>/?since_seq=N`: one session's events after N (what the page was
  rendered with), then live, each as the fragments that update the page (`fragments.py`). The
  page's script reconnects with the last seq it received, so a reconnect misses nothing and
  repeats nothing.
- `ws/dashboard/?q=&status=&model=&owner=&children=`: the session list; a notice of any session's event
  re-renders that session's row (or removes it when it no longer matches the list's filters).

Both refuse anyone but an operator: the handshake is accepted and closed with 4403, the only way
to hand a browser a close code. Both also keep the top bar's count of the tool calls waiting for
an approval live (`ApprovalsBadge`): any session's call asked or answered, or a turn ended.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from sessions_app.agent_ws.event_stream import SessionEventStream
from sessions_app.dashboard import fragments, selectors
from sessions_app.dashboard.auth import is_operator
from sessions_app.dashboard.list_filters import list_filters_of
from sessions_app.engine import repair, runner
from sessions_app.fastpath.channel_announcer import ALL_SESSIONS_GROUP, APPROVALS_GROUP
from sessions_app.fastpath.compat import LoopDispatch

CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


def _query(scope: dict) -> dict[str, str]:
    parsed = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return {key: values[-1] for key, values in parsed.items()}


def _operator(scope: dict) -> Any:
    user = scope.get("user")
    return user if is_operator(user) else None


class ApprovalsBadge(AsyncWebsocketConsumer):
    """The top bar's count, rendered again (an out-of-band swap) on each notice of a change."""

    async def badge_join(self) -> None:
        await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)

    async def badge_leave(self) -> None:
        await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def approvals_changed(self, message: dict) -> None:
        await self.send(text_data=await database_sync_to_async(fragments.approvals_badge_fragment)())


class DashboardSessionConsumer(LoopDispatch, SessionEventStream, ApprovalsBadge):
    operator_name: str = ""

    async def connect(self) -> None:
        await self.accept()
        user = _operator(self.scope)
        if user is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.operator_name = user.get_username()
        try:
            session = await database_sync_to_async(selectors.session_get_for_operator)(
                session_id=self.scope["url_route"]["kwargs"]["session_id"]
            )
        except selectors.NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        try:
            since_seq = max(0, int(_query(self.scope).get("since_seq", "0")))
        except ValueError:
            since_seq = 0
        repair.sweeper_ensure()
        # A turn whose process died is repaired before the replay, which then shows its end.
        await runner.turn_repair_if_dead(session_id=session.pk)
        await self.badge_join()
        await self.stream_join(session.pk, since_seq=since_seq)
        await self.stream_replay()

    async def disconnect(self, code: int) -> None:
        await self.badge_leave()
        await self.stream_leave()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Operators act through the page's forms (HTTP, CSRF-checked); this socket only pushes."""

    async def deliver_events(self, events: list[dict]) -> None:
        assert self.session_id is not None
        render = fragments.session_fragments
        if fragments.only_streamed_text(events):
            # The most frequent event: rendered here, without a trip to the database thread.
            html = render(session_id=self.session_id, events=events, operator=self.operator_name)
        else:
            html = await database_sync_to_async(render)(
                session_id=self.session_id, events=events, operator=self.operator_name
            )
        await self.send(text_data=html)


class DashboardListConsumer(LoopDispatch, ApprovalsBadge):
    filters: dict[str, Any]

    async def connect(self) -> None:
        await self.accept()
        if _operator(self.scope) is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.filters = list_filters_of(_query(self.scope)).selector_kwargs()
        await self.badge_join()
        await self.channel_layer.group_add(ALL_SESSIONS_GROUP, self.channel_name)

    async def disconnect(self, code: int) -> None:
        await self.badge_leave()
        await self.channel_layer.group_discard(ALL_SESSIONS_GROUP, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing to receive: the list only pushes."""

    async def session_notice(self, message: dict) -> None:
        try:
            session_id = str(uuid.UUID(str(message["session_id"])))
        except ValueError:
            return
        html = await database_sync_to_async(fragments.session_row_fragment)(
            session_id=session_id, filters=self.filters
        )
        await self.send(text_data=html)
