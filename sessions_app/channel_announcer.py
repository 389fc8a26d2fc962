"""Broadcasts committed session events to the session's channel-layer group.

Every event goes to its session's group (agent clients, the operator's session page). All but
the frequent `assistant.delta` also go, as a small notice (session id, type, seq: no payload), to
one global group that the dashboard's session list watches.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

ALL_SESSIONS_GROUP = "sessions.all"
# Streamed text changes nothing the session list shows; the message that follows it does.
NOT_NOTICED = frozenset({"assistant.delta"})


def session_group_name(session_id: str) -> str:
    return f"session.{session_id.replace('-', '')}"


def announce_via_channel_layer(frame: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(
        session_group_name(frame["session_id"]), {"type": "session.event", "event": frame}
    )
    if frame["type"] not in NOT_NOTICED:
        async_to_sync(layer.group_send)(
            ALL_SESSIONS_GROUP,
            {
                "type": "session.notice",
                "session_id": frame["session_id"],
                "event_type": frame["type"],
                "seq": frame["seq"],
            },
        )
