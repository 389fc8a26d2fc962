"""A message's content as every reader sees it, whether its row holds it or shares it.

A fork's copy of its parent's message holds no content of its own (issue 31 item 2): its row's
`content` is null and `content_source` names the row that holds the content, always a row that
holds its own (a fork of a fork names the original, so there is no chain to follow). Every
reader of a message's content resolves it through this module, in one of two forms of one rule
("the content of the row named, else the row's own"):
- `messages_with_content(queryset)`: the ORM's, each message with `resolved_content`
  (the row's own `content` deferred, so a large content is read once);
- `content_sql(ref)`: the same as an SQL expression, for statements written by hand (the
  engine's history reads, the fork's outlines and copy).
`content` alone is the row's own column: null for a row that shares. Reading it would show a
fork's copies as empty, which is why no reader does.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import F, JSONField, QuerySet
from django.db.models.functions import Coalesce

from sessions_app.fastpath.compat import Converters, read_converters, values_converted
from sessions_app.fastpath.rows import db_connection, statement_cursor
from sessions_app.models import Message

# The name of the annotation `messages_with_content` gives each message.
RESOLVED = "resolved_content"


def content_resolved() -> Coalesce:
    """The ORM expression of a message's content: the content of the row it shares
    (`content_source`, a left join), else its own."""
    return Coalesce(F("content_source__content"), F("content"), output_field=JSONField())


def messages_with_content(queryset: QuerySet[Message]) -> QuerySet[Message]:
    """`queryset`'s messages, each with its content as `resolved_content` (its own column
    deferred). Apply it before slicing; `.only()` after it must not name `content`."""
    return queryset.defer("content").annotate(**{RESOLVED: content_resolved()})


def content_sql(ref: str) -> str:
    """The SQL expression of the content of the message row `ref` (the quoted table name or
    alias of the row in the caller's statement): the content of the row it shares, else its
    own. A correlated lookup by primary key, so the caller's FROM needs no join."""
    qn = connection.ops.quote_name
    table = qn(Message._meta.db_table)
    pk = qn("id")
    return (
        f"COALESCE((SELECT holder.{qn('content')} FROM {table} AS holder "
        f"WHERE holder.{pk} = {ref}.{qn('content_source_id')}), {ref}.{qn('content')})"
    )


def resolved(message: Message) -> Any:
    """The content of `message`: as `messages_with_content` read it, else its own (a message
    built in Python, or read without it), else, for a row that shares, the holder's (one query)."""
    if RESOLVED in message.__dict__:
        return message.__dict__[RESOLVED]
    if message.content_source_id is None:
        return message.content
    return Message.objects.values_list("content", flat=True).get(pk=message.content_source_id)


# What `message_rows_after` reads of each message, in its order.
ROW_FIELDS = ("position", "role", "content", "token_estimate")


@cache
def _rows_after_sql(vendor: str) -> tuple[str, Converters]:
    """The statement of `message_rows_after` (built once per backend) and its columns'
    converters (the content's are the `content` field's: its value is one of that column's)."""
    qn = db_connection().ops.quote_name
    table = qn(Message._meta.db_table)
    columns = [f"{table}.{qn(name)}" for name in ROW_FIELDS]
    columns[ROW_FIELDS.index("content")] = content_sql(table)
    sql = (
        f"SELECT {', '.join(columns)} FROM {table} WHERE {table}.{qn('session_id')} = %s "
        f"AND {table}.{qn('epoch')} = %s AND {table}.{qn('position')} > %s ORDER BY {table}.{qn('position')}"
    )
    fields = [Message._meta.get_field(name) for name in ROW_FIELDS]
    return sql, read_converters(Message._meta.db_table, fields, db_connection())  # type: ignore[arg-type]


def message_rows_after(*, session_id: uuid.UUID, epoch: int, after_position: int) -> list[list[Any]]:
    """The epoch's messages after `after_position`, in order, each as its `ROW_FIELDS` (the
    content resolved), converted as the ORM reads them: one statement built once, no models."""
    conn = db_connection()
    sql, converters = _rows_after_sql(conn.vendor)
    session = Message._meta.get_field("session").get_db_prep_value(session_id, conn)  # type: ignore[union-attr]
    with statement_cursor(conn) as cursor:
        cursor.execute(sql, [session, epoch, after_position])
        rows = cursor.fetchall()
    return [values_converted(row, converters, conn) for row in rows]
