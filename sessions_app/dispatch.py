"""Consumers' dispatch without a hop to Django's shared database thread per message.

Channels (4.2 and later) awaits `aclose_old_connections()` before every message a consumer
handles: a `sync_to_async` call on Django's one shared thread, for each websocket frame received
and for each channel-layer event delivered. A session's turn delivers half a dozen events to each
watching connection, so with hundreds of sessions every event of every connection waited in line
on that one thread, for a cleanup our consumers do not need: their database work goes through
`database_sync_to_async` (which closes stale connections in the thread where it runs, before
and after) or the engine's `db` (before each call, in its thread).
"""

from __future__ import annotations

from typing import Any

from channels.consumer import get_handler_name


class LoopDispatch:
    """Put first in a consumer's bases: its messages go straight to their handlers."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)
