"""The session's counters (`last_seq`, `next_position`): added to and read back in one statement,
with whatever else the write changes in the session row."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from django.db import connection
from django.db.models import Field

from sessions_app.models import AgentSession
from sessions_app.services.rows import statement_cursor


def returning_supported() -> bool:
    """UPDATE ... RETURNING: PostgreSQL, and SQLite from 3.35."""
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
    return the counter's new value (`session_update`)."""
    return session_update(session_id, add={field: by}, assign=assign)[field]


def session_update(
    session_id: uuid.UUID | str, *, add: dict[str, int] | None = None, assign: dict[str, Any] | None = None
) -> dict[str, int]:
    """One UPDATE of the session row: add to the fields in `add` (counters, usage totals), set
    the fields in `assign`, and return the added fields' new values (inside the caller's
    transaction, whose row lock keeps the counters gapless: `services` package docstring).
    `AgentSession.DoesNotExist` if there is no such session.

    One `UPDATE ... RETURNING` where the database has it, instead of an update and a read back,
    and one statement for everything a write changes in the row: the step path allocates a
    position or seqs in every write it makes.
    """
    counters = _update(session_id, add or {}, assign or {}, {})
    if counters is None:
        raise AgentSession.DoesNotExist(f"no session {session_id}")
    return counters


def session_update_if(
    session_id: uuid.UUID | str,
    *,
    where: dict[str, Any],
    add: dict[str, int] | None = None,
    assign: dict[str, Any] | None = None,
) -> dict[str, int] | None:
    """`session_update` of the row only while its fields in `where` have those values (None, and
    nothing changed, when they do not or there is no such session): the check and the write in
    one statement, which takes the row's lock as `turn_lock`'s read would."""
    return _update(session_id, add or {}, assign or {}, where)


def _update(
    session_id: uuid.UUID | str, add: dict[str, int], assign: dict[str, Any], where: dict[str, Any]
) -> dict[str, int] | None:
    sets: list[str] = []
    params: list[Any] = []
    for name, by in add.items():
        column = _field(name)[1]
        sets.append(f"{column} = {column} + %s")
        params.append(by)
    for name, value in assign.items():
        model_field, column = _field(name)
        sets.append(f"{column} = %s")
        params.append(model_field.get_db_prep_save(value, connection))
    pk, pk_column = _field("id")
    table = connection.ops.quote_name(AgentSession._meta.db_table)
    conditions = [f"{pk_column} = %s"]
    keys = [pk.get_db_prep_value(session_id, connection)]
    for name, value in where.items():
        model_field, column = _field(name)
        if value is None:
            conditions.append(f"{column} IS NULL")
        else:
            conditions.append(f"{column} = %s")
            keys.append(model_field.get_db_prep_value(value, connection))
    update = f"UPDATE {table} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    returned = [_field(name)[1] for name in add]
    row: Any
    with statement_cursor() as cursor:
        if returned and returning_supported():
            cursor.execute(f"{update} RETURNING {', '.join(returned)}", [*params, *keys])
            row = cursor.fetchone()
        else:
            cursor.execute(update, [*params, *keys])
            row = () if cursor.rowcount else None
            if row is not None and returned:
                cursor.execute(f"SELECT {', '.join(returned)} FROM {table} WHERE {pk_column} = %s", [keys[0]])
                row = cursor.fetchone()
    if row is None:
        return None
    return {name: int(value) for name, value in zip(add, row, strict=True)}
