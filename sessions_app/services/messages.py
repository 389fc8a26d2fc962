"""Messages of a session's history: each with the session's next position and its token estimate."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.types import StoredMessage
from sessions_app.fastpath.counters import session_counter_add
from sessions_app.fastpath.rows import values_insert
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import AgentSession, Message, MessageRole
from sessions_app.services.recall import recall_message_index, recall_messages_reindex


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
    """Append a message to the session's history, and its search document (`services.recall`),
    inside the caller's transaction."""
    position = session_counter_add(session_id, "next_position", 1, last_activity_at=timezone.now()) - 1
    message = _message(session_id, position, epoch, role, content, turn_id, token_estimate, metadata)
    message.save(force_insert=True)
    recall_message_index(
        session_id=session_id,
        epoch=epoch,
        role=role,
        content=content,
        metadata=metadata,
        at=message.created_at,
        message_id=message.pk,
    )
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
    "content_source_id",
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
    messages by position. Its search document is written too (`services.recall`)."""
    if token_estimate is None:
        token_estimate = estimate_json_tokens(content)
    role = str(role)
    now = timezone.now()
    values_insert(
        Message,
        _INSERTED,
        [(session_id, position, epoch, role, content, None, token_estimate, turn_id, {}, now)],
    )
    recall_message_index(
        session_id=session_id, epoch=epoch, role=role, content=content, at=now, position=position
    )
    return StoredMessage(position, role, content, token_estimate)


def dangling_tool_uses(session: AgentSession) -> list[str]:
    """Ids of tool_use blocks in the epoch's last message that never got a result."""
    qs = Message.objects.filter(session=session, epoch=session.epoch).order_by("-position")
    last = messages_with_content(qs).first()
    if last is None or last.role != MessageRole.ASSISTANT:
        return []
    return [b["id"] for b in resolved(last) if isinstance(b, dict) and b.get("type") == "tool_use"]


# The copy is one INSERT ... SELECT of rows that share their sources' contents (the model's
# docstring): no content is written again, nor read into Python. A copy names the row holding
# the content (a source that shares names its own holder: no chains). `{positions}` is the
# source positions (one parameter, whatever their number); the copies are numbered 0, 1, ... in
# their order.
_COPY_SQL = (
    "INSERT INTO {table} (session_id, position, epoch, role, content, content_source_id, token_estimate, "
    "turn_id, metadata, created_at) SELECT %s, ROW_NUMBER() OVER (ORDER BY position) - 1, 0, role, NULL, "
    "COALESCE(content_source_id, id), token_estimate, NULL, {metadata}, %s FROM {table} "
    "WHERE session_id = %s AND {positions}"
)
_COPY_VENDOR_SQL = {
    "postgresql": {
        "metadata": "CAST(%s AS jsonb) || jsonb_build_object('from_position', position)",
        "positions": (
            "position IN (SELECT CAST(value AS integer) FROM jsonb_array_elements_text(CAST(%s AS jsonb)))"
        ),
    },
    "sqlite": {
        "metadata": "json_set(%s, '$.from_position', position)",
        "positions": "position IN (SELECT value FROM json_each(%s))",
    },
}


def messages_copy(
    *,
    source_session_id: uuid.UUID,
    positions: Sequence[int],
    target_session_id: uuid.UUID,
    marker: dict[str, Any],
) -> int:
    """Copy the source's messages at `positions` into the target's epoch 0, at positions 0, 1, ...
    in the order of their source positions, each with its content, role and token estimate, no
    turn, and the metadata `marker` plus `"from_position"` (its source position). Inside the
    caller's transaction; the target's `next_position` is the caller's to set. The copies share
    their sources' contents (the row holding each, never a copy of it): one statement, and no
    content is written again nor read into Python. Nor is it indexed again: the search finds
    the copies' text through their holders' documents. Returns how many."""
    if not positions:
        return 0
    vendor = _COPY_VENDOR_SQL[connection.vendor]
    table = connection.ops.quote_name(Message._meta.db_table)
    sql = _COPY_SQL.format(table=table, metadata=vendor["metadata"], positions=vendor["positions"])
    ids = Message._meta.get_field("session")
    created_at = Message._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    params = [
        ids.get_db_prep_value(target_session_id, connection),
        json.dumps(marker),
        created_at,
        ids.get_db_prep_value(source_session_id, connection),
        json.dumps(list(positions)),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


# How many contents `messages_content_keep` hands over per statement (bounds its parameters).
KEEP_BATCH = 500


def messages_content_keep(*, messages: QuerySet[Message]) -> int:
    """Before `messages` are deleted (inside the caller's transaction): each content one of them
    holds that other messages share (a fork's copies) goes to one of those (the first written),
    and its other sharers name that one instead. No content passes through Python: the database
    copies each from row to row. Each heir is then indexed (`recall_messages_reindex`): the holder's
    document, which stood for it, goes with the holder. Returns how many contents were handed
    over.

    Deleting a message that others share without this first is refused by the database
    (`content_source`'s foreign key, checked at commit: an `IntegrityError`), so a message never
    loses its content when the one it was copied from goes: with its session
    (`session_tree_delete`), or alone."""
    sharers = (
        Message.objects.filter(content_source__in=messages.values("pk"))
        .exclude(pk__in=messages.values("pk"))
        .order_by("pk")
        .values_list("pk", "content_source_id")
    )
    heirs: dict[int, int] = {}
    for pk, holder in sharers.iterator():
        heirs.setdefault(holder, pk)
    items = sorted(heirs.items())
    table = connection.ops.quote_name(Message._meta.db_table)
    for start in range(0, len(items), KEEP_BATCH):
        batch = dict(items[start : start + KEEP_BATCH])
        # The heir takes the content of the row it names (SET reads the row as it was).
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET content = (SELECT holder.content FROM {table} AS holder "
                f"WHERE holder.id = {table}.content_source_id), content_source_id = NULL "
                f"WHERE id IN ({', '.join(['%s'] * len(batch))})",
                list(batch.values()),
            )
        Message.objects.filter(content_source_id__in=list(batch)).exclude(
            pk__in=messages.values("pk")
        ).update(
            content_source_id=Case(*(When(content_source_id=h, then=Value(p)) for h, p in batch.items()))
        )
        recall_messages_reindex(message_ids=list(batch.values()))
    return len(items)
