"""Messages of a session's history: each with the session's next position and its token estimate."""

from __future__ import annotations

import uuid

from django.utils import timezone

from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.types import StoredMessage
from sessions_app.fastpath.counters import session_counter_add
from sessions_app.fastpath.rows import values_insert
from sessions_app.models import AgentSession, Message, MessageRole


def message_write(
    *,
    session_id: uuid.UUID,
    epoch: int,
    role: str,
    content: list[dict],
    turn_id: uuid.UUID | None,
    metadata: dict | None = None,
    token_estimate: int | None = None,
) -> Message:
    """Append a message to the session's history (inside the caller's transaction)."""
    position = session_counter_add(session_id, "next_position", 1, last_activity_at=timezone.now()) - 1
    message = _message(session_id, position, epoch, role, content, turn_id, token_estimate, metadata)
    message.save(force_insert=True)
    return message


def _message(
    session_id: uuid.UUID,
    position: int,
    epoch: int,
    role: str,
    content: list[dict],
    turn_id: uuid.UUID | None,
    token_estimate: int | None,
    metadata: dict | None,
) -> Message:
    """The message row, not saved (its estimate counted when the caller did not)."""
    return Message(
        session_id=session_id,
        position=position,
        epoch=epoch,
        role=role,
        content=content,
        token_estimate=estimate_json_tokens(content) if token_estimate is None else token_estimate,
        turn_id=turn_id,
        metadata=metadata or {},
    )


# What `message_insert` writes, by attname: every field of `Message` the database does not number.
_INSERTED = (
    "session_id",
    "position",
    "epoch",
    "role",
    "content",
    "token_estimate",
    "turn_id",
    "metadata",
    "created_at",
)


def message_insert(
    *,
    session_id: uuid.UUID,
    position: int,
    epoch: int,
    role: str,
    content: list[dict],
    turn_id: uuid.UUID | None,
    token_estimate: int | None = None,
) -> StoredMessage:
    """Insert a message at the `position` the caller allocated in its own update of the session
    row (`counters.session_update`, adding 1 to `next_position`, and setting `last_activity_at`),
    without building a `Message` (the step path writes two a turn, and a model's constructor walks
    all its fields). Returns it as the engine's history holds it: the step path refers to
    messages by position."""
    if token_estimate is None:
        token_estimate = estimate_json_tokens(content)
    role = str(role)
    values_insert(
        Message,
        _INSERTED,
        [(session_id, position, epoch, role, content, token_estimate, turn_id, {}, timezone.now())],
    )
    return StoredMessage(position, role, content, token_estimate)


def dangling_tool_uses(session: AgentSession) -> list[str]:
    """Ids of tool_use blocks in the epoch's last message that never got a result."""
    last = Message.objects.filter(session=session, epoch=session.epoch).order_by("-position").first()
    if last is None or last.role != MessageRole.ASSISTANT:
        return []
    return [b["id"] for b in last.content if isinstance(b, dict) and b.get("type") == "tool_use"]
