"""The long-term search index's documents (`RecallDocument`), written in the caller's
transaction by every service that stores what they index: a message (`message_write`,
`message_insert`), an archive's summary (compaction), an offloaded observation's content (the
observations feature), a content written in place (`recall_messages_reindex`), a message
carried into the next epoch (`recall_documents_carry`). The database keeps its full-text index
of them itself (the migration's triggers on SQLite, an expression index on PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.utils import timezone

from sessions_app.common.recall_text import (
    KIND_MESSAGE,
    KIND_OBSERVATION,
    KIND_SUMMARY,
    ROLE_SUMMARY,
    ROLE_TOOL,
    message_indexed,
    message_search_role,
    message_search_text,
    text_for_index,
)
from sessions_app.fastpath.rows import db_connection, statement_cursor, values_insert
from sessions_app.models import AgentSession, Archive, Message, RecallDocument

# What `values_insert` writes of a document, by attname.
_FIELDS = ("session_id", "epoch", "message_id", "kind", "role", "ref", "at", "text")


@cache
def _by_position_sql(vendor: str) -> str:
    """A message's document, its id read from its (session, position) in the same statement:
    the step path inserts its messages without reading their ids back."""
    qn = db_connection().ops.quote_name
    columns = ", ".join(qn(RecallDocument._meta.get_field(n).column) for n in _FIELDS)  # type: ignore[union-attr]
    message = qn(Message._meta.db_table)
    return (
        f"INSERT INTO {qn(RecallDocument._meta.db_table)} ({columns}) "
        f"SELECT %s, %s, {message}.{qn('id')}, %s, %s, '', %s, %s FROM {message} "
        f"WHERE {message}.{qn('session_id')} = %s AND {message}.{qn('position')} = %s"
    )


def _prepared(name: str, value: Any, connection: Any) -> Any:
    return RecallDocument._meta.get_field(name).get_db_prep_save(value, connection)  # type: ignore[union-attr]


def recall_message_index(
    *,
    session_id: uuid.UUID,
    epoch: int,
    role: str,
    content: Any,
    metadata: Any = None,
    at: datetime | None = None,
    message_id: int | None = None,
    position: int | None = None,
) -> bool:
    """Index a message just stored (by `message_id`, or by its `position` in the session), inside
    the caller's transaction. A message without text, or one whose text is indexed elsewhere
    (`message_indexed`), gets no document. Returns whether one was written."""
    if not message_indexed(metadata):
        return False
    text = message_search_text(content)
    if not text.strip():
        return False
    role = message_search_role(str(role), content)
    at = at or timezone.now()
    if message_id is not None:
        values_insert(
            RecallDocument, _FIELDS, [(session_id, epoch, message_id, KIND_MESSAGE, role, "", at, text)]
        )
        return True
    assert position is not None, "a message is named by its id or its position"
    connection = db_connection()
    params = [
        _prepared("session", session_id, connection),
        epoch,
        KIND_MESSAGE,
        role,
        _prepared("at", at, connection),
        text,
        _prepared("session", session_id, connection),
        position,
    ]
    with statement_cursor(connection) as cursor:
        cursor.execute(_by_position_sql(connection.vendor), params)
    return True


def recall_summary_index(*, archive: Archive) -> None:
    """Index a compaction's summary (inside the caller's transaction), in the epoch it closed."""
    RecallDocument.objects.create(
        session_id=archive.session_id,
        epoch=archive.epoch,
        kind=KIND_SUMMARY,
        role=ROLE_SUMMARY,
        ref=str(archive.id),
        at=archive.created_at,
        text=text_for_index(archive.summary),
    )


def recall_observation_index(*, session_id: uuid.UUID, observation_id: str, text: str, at: datetime) -> None:
    """Index an offloaded observation's content (its first characters) in the session's current
    epoch, inside the caller's transaction."""
    if not text.strip():
        return
    epoch = AgentSession.objects.filter(pk=session_id).values_list("epoch", flat=True).get()
    RecallDocument.objects.create(
        session_id=session_id,
        epoch=epoch,
        kind=KIND_OBSERVATION,
        role=ROLE_TOOL,
        ref=observation_id,
        at=at,
        text=text_for_index(text),
    )


def recall_observations_forget(*, observation_ids: Sequence[str]) -> int:
    """Drop the documents of observations whose content is gone (collected when it expired)."""
    if not observation_ids:
        return 0
    deleted, _ = RecallDocument.objects.filter(kind=KIND_OBSERVATION, ref__in=list(observation_ids)).delete()
    return deleted


def recall_documents_carry(*, carried: Sequence[tuple[int, int]], epoch: int) -> int:
    """Move the documents of messages carried verbatim into the next epoch (`carried`: each
    original's id and its copy's) to their copies, in `epoch`: the text stays indexed once, and
    is left out of the session's own searches while it is in view again. Returns how many."""
    moved = 0
    for original, copy in carried:
        moved += RecallDocument.objects.filter(message_id=original).update(message_id=copy, epoch=epoch)
    return moved


def recall_messages_reindex(*, message_ids: Sequence[int]) -> int:
    """Index again messages whose own content was just written in place: a fork's copy handed
    the content it shared before its holder is deleted (`messages_content_keep`; until then the
    holder's document stood for it), or a copy that came to differ from its source. Their old
    documents, if any, are replaced. Returns how many were indexed."""
    ids = list(message_ids)
    RecallDocument.objects.filter(message_id__in=ids).delete()
    count = 0
    for message in Message.objects.filter(pk__in=ids, content__isnull=False).iterator(chunk_size=50):
        count += recall_message_index(
            session_id=message.session_id,
            epoch=message.epoch,
            role=message.role,
            content=message.content,
            metadata=message.metadata,
            at=message.created_at,
            message_id=message.pk,
        )
    return count
