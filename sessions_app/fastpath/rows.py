"""The statements every turn runs, written once per shape instead of compiled by the ORM per call.

A one-step turn writes a dozen rows and reads and locks its session twice. Through the ORM each
statement is a queryset built, resolved and compiled to SQL before the database sees it: about
a quarter of a millisecond of Python apiece, most of a turn's server work (issue 12's profile).
Here the SQL of each shape (a model's insert of n rows, the session row's read, an update of the
session row that adds to counters and reads them back) is built once from the models' metadata
and cached; values still go through each field's own `get_db_prep_save` (on SQLite the
commonest ones converted the same way at once: `compat.field_preparer`) and come back through
the backend's and the field's converters, exactly as the ORM would send and read them. What this
relies on of Django beyond its documented API is in `compat.py`, with the versions it was
written for.

Rows are inserted without signals (the models here have no receivers) and without reading back
an auto-increment primary key: callers use these for rows they do not refer to by `pk`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import AutoField, BigAutoField, Field, Model, SmallAutoField

from sessions_app.fastpath.compat import (
    Converters,
    Preparer,
    SQLiteStatement,
    async_unsafe,
    field_preparer,
    instance_from_db,
    instances_saved,
    read_converters,
    sqlite_direct_allowed,
    values_converted,
)

M = TypeVar("M", bound=Model)


def db_connection() -> Any:
    """The thread's connection wrapper, looked up once: each attribute of `django.db.connection`
    (a proxy) looks the wrapper up again in a context-local store, a few µs apiece, and a turn's
    statements read dozens of them (its fields' preparation, the transaction's checks)."""
    return connections[DEFAULT_DB_ALIAS]


@async_unsafe
def statement_cursor(connection: Any = None) -> Any:
    """A cursor for one of these statements (`with statement_cursor() as cursor:`). On SQLite,
    unless queries are being logged (DEBUG, a test capturing them) or watched
    (`connection.execute_wrapper`), the sqlite3 cursor itself (`compat.SQLiteStatement`: on
    Django's own connection, so it waits for SQLite's lock as Django's statements do); else
    Django's own. `connection`: the thread's (`db_connection()`), when the caller has it."""
    if connection is None:
        connection = db_connection()
    if sqlite_direct_allowed(connection):
        return SQLiteStatement(connection)
    return connection.cursor()


def _insertable(model: type[Model]) -> list[Field]:
    return [
        f
        for f in model._meta.concrete_fields
        if not isinstance(f, (AutoField, BigAutoField, SmallAutoField))  # the database numbers them
    ]


def _column(field: Field) -> str:
    assert field.column, field
    return field.column


# ---------------------------------------------------------------------------
# Values as the database takes them
# ---------------------------------------------------------------------------
@cache
def _preparers(model: type[Model], vendor: str) -> list[Preparer]:
    """`compat.field_preparer` of each field `_insert_sql` inserts, in its order (looked up once
    per model: a field's hash is a Python call, and a turn prepares a hundred values)."""
    return [field_preparer(f, vendor) for f in _insertable(model)]


@cache
def _insert_sql(model: type[Model], rows: int, vendor: str) -> tuple[str, list[Field]]:
    connection = db_connection()
    fields = _insertable(model)
    qn = connection.ops.quote_name
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    columns = ", ".join(qn(_column(f)) for f in fields)
    return f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES {', '.join([row] * rows)}", fields


def objects_insert(objects: Sequence[Model]) -> None:
    """Insert `objects` (instances of one model, built but not saved) in one statement."""
    if not objects:
        return
    connection = db_connection()
    sql, fields = _insert_sql(type(objects[0]), len(objects), connection.vendor)
    prepare = _preparers(type(objects[0]), connection.vendor)
    params = [
        p(f.pre_save(obj, True), connection) for obj in objects for f, p in zip(fields, prepare, strict=True)
    ]
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, params)
    instances_saved(objects, connection.alias)


@cache
def _insert_order(model: type[Model], names: tuple[str, ...]) -> tuple[int, ...]:
    """Where each field `_insert_sql` inserts, in `names` (which must name them all, by attname)."""
    fields = _insertable(model)
    assert sorted(names) == sorted(f.attname for f in fields), (model, names)
    return tuple(names.index(f.attname) for f in fields)


def values_insert(model: type[Model], names: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> None:
    """Insert `rows` of `model`, each the values of the fields `names` (by attname: every field
    the database does not number), in one statement, without building model instances (a
    model's constructor walks all its fields and their defaults: the step path writes a dozen
    rows). Each value goes through its field's `get_db_prep_save`, as `objects_insert` sends it."""
    if not rows:
        return
    connection = db_connection()
    sql, _fields = _insert_sql(model, len(rows), connection.vendor)
    order = _insert_order(model, names)
    prepare = _preparers(model, connection.vendor)
    params = [p(row[i], connection) for row in rows for p, i in zip(prepare, order, strict=True)]
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, params)


def _converters(table: str, fields: list[Field]) -> Converters:
    return read_converters(table, fields, db_connection())


@cache
def _select_sql(
    model: type[Model], lock: bool, vendor: str, names: tuple[str, ...] | None = None
) -> tuple[str, list[Field], Converters]:
    connection = db_connection()
    if names is None:
        fields = list(model._meta.concrete_fields)
    else:
        fields = [model._meta.get_field(name) for name in names]  # type: ignore[misc]
    qn = connection.ops.quote_name
    table = model._meta.db_table
    columns = ", ".join(qn(_column(f)) for f in fields)
    pk = model._meta.pk
    assert pk is not None
    sql = f"SELECT {columns} FROM {qn(table)} WHERE {qn(_column(pk))} = %s"
    if lock and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql, fields, _converters(table, fields)


def object_get(model: type[M], pk: Any, *, lock: bool = False, only: tuple[str, ...] | None = None) -> M:
    """`model.objects.get(pk=pk)` (`select_for_update()` with `lock`: on SQLite the transaction's
    own write lock, as the ORM does; `.only(*only)` with `only`, which must name the key);
    `model.DoesNotExist` when there is no such row."""
    if only is not None:
        only = object_fields(model, only)
    fields, values = _row_get(model, pk, lock, only)
    return model.from_db(DEFAULT_DB_ALIAS, [f.attname for f in fields], values)


@cache
def object_fields(model: type[Model], names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` in the model's field order, as `from_db` takes a partial row (`object_get`,
    `object_from_row`)."""
    order = {f.attname: i for i, f in enumerate(model._meta.concrete_fields)}
    return tuple(sorted(names, key=lambda name: order[model._meta.get_field(name).attname]))  # type: ignore[union-attr]


def object_from_row(model: type[M], names: tuple[str, ...], row: Sequence[Any], connection: Any) -> M:
    """A partial instance of `model` (its other fields deferred) from `row`, the columns of the
    fields `names` (in the model's field order: `object_fields`) as the database gave them,
    converted as the ORM converts what it reads."""
    fields, converters = _read_converters(model, names, connection.vendor)
    values = values_converted(row, converters, connection)
    return instance_from_db(model, [f.attname for f in fields], values, DEFAULT_DB_ALIAS)


@cache
def _read_converters(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[list[Field], Converters]:
    fields = [f for f in (model._meta.get_field(name) for name in names) if isinstance(f, Field)]
    assert len(fields) == len(names), names
    return fields, _converters(model._meta.db_table, fields)


def values_get(model: type[Model], pk: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    """`model.objects.filter(pk=pk).values_list(*names).get()`; `model.DoesNotExist` when there
    is no such row."""
    return tuple(_row_get(model, pk, False, names)[1])


def _row_get(
    model: type[Model], pk: Any, lock: bool, names: tuple[str, ...] | None
) -> tuple[list[Field], list[Any]]:
    connection = db_connection()
    sql, fields, converters = _select_sql(model, lock, connection.vendor, names)
    assert model._meta.pk is not None
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(pk, connection)])
        row = cursor.fetchone()
    if row is None:
        raise model.DoesNotExist(f"no {model._meta.object_name} {pk}")  # type: ignore[attr-defined]
    return fields, values_converted(row, converters, connection)


@cache
def _update_sql(model: type[Model], names: tuple[str, ...], vendor: str) -> tuple[str, list[Field]]:
    qn = db_connection().ops.quote_name
    fields = [model._meta.get_field(name) for name in names]
    assert all(isinstance(f, Field) for f in fields)
    pk = model._meta.pk
    assert pk is not None
    sets = ", ".join(f"{qn(_column(f))} = %s" for f in fields)  # type: ignore[arg-type]
    return f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(_column(pk))} = %s", fields  # type: ignore[return-value]


def object_update(model: type[Model], pk: Any, **assign: Any) -> int:
    """`model.objects.filter(pk=pk).update(**assign)` (plain values only); the rows changed."""
    connection = db_connection()
    sql, fields = _update_sql(model, tuple(assign), connection.vendor)
    assert model._meta.pk is not None
    vendor = connection.vendor
    params = [
        field_preparer(f, vendor)(value, connection) for f, value in zip(fields, assign.values(), strict=True)
    ]
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, [*params, model._meta.pk.get_db_prep_value(pk, connection)])
        return cursor.rowcount


OPERATORS = frozenset({"=", "<", "<=", ">", ">=", "!="})


@cache
def _where_sql(
    model: type[Model],
    names: tuple[str, ...],
    where: tuple[tuple[str, str], ...],
    order_by: str | None,
    limit: int | None,
    vendor: str,
) -> tuple[str, list[Field], Converters]:
    """`names` empty: `SELECT COUNT(*)`."""
    qn = db_connection().ops.quote_name
    table = model._meta.db_table
    fields: list[Field] = [model._meta.get_field(name) for name in names]  # type: ignore[misc]
    conditions = []
    for name, op in where:
        assert op in OPERATORS, op
        conditions.append(f"{qn(_column(model._meta.get_field(name)))} {op} %s")  # type: ignore[arg-type]
    columns = ", ".join(qn(_column(f)) for f in fields) if fields else "COUNT(*)"
    sql = f"SELECT {columns} FROM {qn(table)} WHERE {' AND '.join(conditions)}"
    if order_by is not None:
        sql += f" ORDER BY {qn(_column(model._meta.get_field(order_by)))}"  # type: ignore[arg-type]
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, fields, _converters(table, fields)


def _where_params(
    model: type[Model], where: tuple[tuple[str, str], ...], params: Sequence[Any], connection: Any
) -> list[Any]:
    return [
        model._meta.get_field(name).get_db_prep_value(value, connection)  # type: ignore[union-attr]
        for (name, _), value in zip(where, params, strict=True)
    ]


def values_where(
    model: type[Model],
    names: tuple[str, ...],
    where: tuple[tuple[str, str], ...],
    params: Sequence[Any],
    *,
    order_by: str | None = None,
    limit: int | None = None,
) -> list[tuple[Any, ...]]:
    """`model.objects.filter(...).order_by(order_by).values_list(*names)[:limit]`, the filter
    being each `(field, operator)` of `where` compared with its value in `params`, all of them
    ANDed."""
    assert names, "values_where reads at least one field (count_where counts)"
    connection = db_connection()
    sql, _, converters = _where_sql(model, names, where, order_by, limit, connection.vendor)
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, _where_params(model, where, params, connection))
        rows = cursor.fetchall()
    return [tuple(values_converted(row, converters, connection)) for row in rows]


def exists_where_any(
    model: type[Model], alternatives: Sequence[tuple[tuple[tuple[str, str], ...], Sequence[Any]]]
) -> bool:
    """Whether a row matches any of `alternatives`, each a `(where, params)` as `values_where`
    takes them: `filter(Q(...) | Q(...)).exists()` in one statement, each alternative its own
    lookup (`UNION ALL`, so each may use its index), stopping at the first row found."""
    pk = model._meta.pk
    assert pk is not None
    connection = db_connection()
    parts = [
        _where_sql(model, (pk.name,), where, None, None, connection.vendor)[0] for where, _ in alternatives
    ]
    params = [
        value for where, values in alternatives for value in _where_params(model, where, values, connection)
    ]
    with statement_cursor(connection) as cursor:
        cursor.execute(" UNION ALL ".join(parts) + " LIMIT 1", params)
        return cursor.fetchone() is not None


def count_where(model: type[Model], where: tuple[tuple[str, str], ...], params: Sequence[Any]) -> int:
    """`model.objects.filter(...).count()`, the filter as `values_where`'s."""
    connection = db_connection()
    sql, _, _ = _where_sql(model, (), where, None, None, connection.vendor)
    with statement_cursor(connection) as cursor:
        cursor.execute(sql, _where_params(model, where, params, connection))
        return int(cursor.fetchone()[0])
