"""The session's counters (`last_seq`, `next_position`): added to and read back in one statement,
with whatever else the write changes in the session row."""

from __future__ import annotations

import functools
import sqlite3
import uuid
from typing import Any

from django.db.models import Field

from sessions_app.fastpath.compat import field_preparer
from sessions_app.fastpath.rows import db_connection, object_fields, object_from_row, statement_cursor
from sessions_app.models import AgentSession


def returning_supported(connection: Any = None) -> bool:
    """UPDATE ... RETURNING: PostgreSQL, and SQLite from 3.35."""
    vendor = (connection or db_connection()).vendor
    if vendor == "postgresql":
        return True
    return vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35, 0)


def _field(name: str) -> tuple[Field, str]:
    """`AgentSession`'s concrete field `name` and its quoted column."""
    field = AgentSession._meta.get_field(name)
    assert isinstance(field, Field) and field.column, name
    return field, db_connection().ops.quote_name(field.column)


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
    found = _update(session_id, add or {}, assign or {}, {})
    if found is None:
        raise AgentSession.DoesNotExist(f"no session {session_id}")
    return found[0]


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
    found = _update(session_id, add or {}, assign or {}, where)
    return None if found is None else found[0]


def session_update_if_read(
    session_id: uuid.UUID | str,
    *,
    where: dict[str, Any],
    add: dict[str, int],
    assign: dict[str, Any],
    read: tuple[str, ...],
) -> tuple[AgentSession, dict[str, int]] | None:
    """`session_update_if`, which also gives the row's fields `read` as the update left them (a
    partial `AgentSession`, the rest deferred; `read` must name `id`), from the same statement:
    what a read of the row under its lock, then the update, would give."""
    found = _update(session_id, add, assign, where, read=object_fields(AgentSession, read))
    if found is None:
        return None
    counters, row = found
    assert row is not None
    return row, counters


@functools.cache
def _update_sql(
    add: tuple[str, ...],
    assign: tuple[str, ...],
    where: tuple[tuple[str, bool], ...],
    vendor: str,
    returning: bool,
    read: tuple[str, ...] = (),
) -> tuple[str, str, list[Field], list[Field]]:
    """The statement of one shape of `_update` (built once: the step path runs a few shapes),
    its read back where there is no RETURNING, and the fields whose values it takes (`assign`'s,
    then `where`'s not None). It returns (or reads back) the fields of `add`, then of `read`."""
    sets = [f"{_field(name)[1]} = {_field(name)[1]} + %s" for name in add]
    sets += [f"{_field(name)[1]} = %s" for name in assign]
    pk_column = _field("id")[1]
    conditions = [f"{pk_column} = %s"]
    conditions += [
        f"{_field(name)[1]} IS NULL" if null else f"{_field(name)[1]} = %s" for name, null in where
    ]
    table = db_connection().ops.quote_name(AgentSession._meta.db_table)
    update = f"UPDATE {table} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    returned = ", ".join(_field(name)[1] for name in (*add, *read))
    if returned and returning:
        update += f" RETURNING {returned}"
    read_back = f"SELECT {returned} FROM {table} WHERE {pk_column} = %s" if returned else ""
    fields = [_field(name)[0] for name in assign]
    keys = [_field(name)[0] for name, null in where if not null]
    return update, read_back, fields, keys


def _update(
    session_id: uuid.UUID | str,
    add: dict[str, int],
    assign: dict[str, Any],
    where: dict[str, Any],
    *,
    read: tuple[str, ...] = (),
) -> tuple[dict[str, int], AgentSession | None] | None:
    """The update; None when no row matched, else the added fields' new values and, with `read`
    (names in the model's field order: `rows.object_fields`), the row's fields as a model."""
    connection = db_connection()
    returning = bool(add or read) and returning_supported(connection)
    update, read_back, fields, keys = _update_sql(
        tuple(add),
        tuple(assign),
        tuple((name, value is None) for name, value in where.items()),
        connection.vendor,
        returning,
        read,
    )
    params: list[Any] = list(add.values())
    params += [
        field_preparer(f, connection.vendor)(value, connection)
        for f, value in zip(fields, assign.values(), strict=True)
    ]
    key = AgentSession._meta.pk.get_db_prep_value(session_id, connection)  # type: ignore[union-attr]
    params.append(key)
    params += [
        f.get_db_prep_value(value, connection)
        for f, value in zip(keys, (v for v in where.values() if v is not None), strict=True)
    ]
    row: Any
    with statement_cursor(connection) as cursor:
        cursor.execute(update, params)
        if returning:
            row = cursor.fetchone()
        else:
            row = () if cursor.rowcount else None
            if row is not None and read_back:
                cursor.execute(read_back, [key])
                row = cursor.fetchone()
    if row is None:
        return None
    counters = {name: int(value) for name, value in zip(add, row, strict=False)}
    return counters, object_from_row(AgentSession, read, row[len(add) :], connection) if read else None
