"""The session's counters (`last_seq`, `next_position`): added to and read back in one statement."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from django.db import connection
from django.db.models import F, Field

from sessions_app.models import AgentSession


def _returning_supported() -> bool:
    # UPDATE ... RETURNING: PostgreSQL, and SQLite from 3.35.
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35, 0)


def _field(name: str) -> tuple[Field, str]:
    """`AgentSession`'s concrete field `name` and its quoted column."""
    field = AgentSession._meta.get_field(name)
    assert isinstance(field, Field) and field.column, name
    return field, connection.ops.quote_name(field.column)


def session_counter_add(session_id: uuid.UUID | str, field: str, by: int, **assign: Any) -> int:
    """Add `by` to the session's counter `field`, set the other fields in `assign` with it, and
    return the counter's new value (inside the caller's transaction, whose row lock keeps the
    counter gapless: `services` package docstring).

    One `UPDATE ... RETURNING` where the database has it, instead of an update and a read back:
    the step path allocates a position or seqs in every write it makes.
    """
    if not _returning_supported():
        AgentSession.objects.filter(pk=session_id).update(**{field: F(field) + by}, **assign)
        return AgentSession.objects.filter(pk=session_id).values_list(field, flat=True).get()
    counter = _field(field)[1]
    sets = [f"{counter} = {counter} + %s"]
    params: list[Any] = [by]
    for name, value in assign.items():
        model_field, column = _field(name)
        sets.append(f"{column} = %s")
        params.append(model_field.get_db_prep_save(value, connection))
    pk, pk_column = _field("id")
    params.append(pk.get_db_prep_value(session_id, connection))
    table = connection.ops.quote_name(AgentSession._meta.db_table)
    sql = f"UPDATE {table} SET {', '.join(sets)} WHERE {pk_column} = %s RETURNING {counter}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise AgentSession.DoesNotExist(f"no session {session_id}")
    return int(row[0])
