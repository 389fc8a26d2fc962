"""Broadcasts committed session events to the session's channel-layer group."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def session_group_name(session_id: str) -> str:
    return f"session.{session_id.replace('-', '')}"


def announce_via_channel_layer(frame: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(
        session_group_name(frame["session_id"]), {"type": "session.event", "event": frame}
    )
