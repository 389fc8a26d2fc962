"""The statements every turn runs, written once per shape instead of compiled by the ORM per call.

A one-step turn writes a dozen rows and reads and locks its session twice. Through the ORM each
statement is a queryset built, resolved and compiled to SQL before the database sees it: about
a quarter of a millisecond of Python apiece, most of a turn's server work (issue 12's profile).
Here the SQL of each shape (a model's insert of n rows, the session row's read, an update of the
session row that adds to counters and reads them back) is built once from the models' metadata
and cached; values still go through each field's own `get_db_prep_save` (on SQLite the
commonest ones converted the same way at once: `preparer`) and come back through the backend's
and the field's converters, exactly as the ORM would send and read them.

Rows are inserted without signals (the models here have no receivers) and without reading back
an auto-increment primary key: callers use these for rows they do not refer to by `pk`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import AutoField, BigAutoField, Field, Model, SmallAutoField
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils.asyncio import async_unsafe

M = TypeVar("M", bound=Model)


def db_connection() -> Any:
    """The thread's connection wrapper, looked up once: each attribute of `django.db.connection`
    (a proxy) looks the wrapper up again in a context-local store, a few µs apiece, and a turn's
    statements read dozens of them (its fields' preparation, the transaction's checks)."""
    return connections[DEFAULT_DB_ALIAS]


# ---------------------------------------------------------------------------
# The cursor these statements run on
# ---------------------------------------------------------------------------
# Django's SQLite placeholder rewrite (`SQLiteCursorWrapper.convert_query`), done once per shape.
_FORMAT_QMARK = re.compile(r"(?<!%)%s")


@lru_cache(maxsize=1024)
def _qmark(sql: str) -> str:
    return _FORMAT_QMARK.sub("?", sql).replace("%%", "%")


class _SQLiteStatement:
    """The thread's sqlite3 cursor without Django's wrappers around each statement (its cursor
    object, the debug and execute wrappers, the placeholder rewrite: ~17 µs a statement, a turn
    runs ~20 of them): the same SQL and values, the same transaction rules
    (`validate_no_broken_transaction`), Django's exceptions (`wrap_database_errors`)."""

    __slots__ = ("_connection", "_cursor")

    def __init__(self, connection: Any) -> None:
        connection.close_if_health_check_failed()
        if connection.connection is None:
            connection.ensure_connection()
        self._connection = connection
        self._cursor = connection.connection.cursor()

    def __enter__(self) -> _SQLiteStatement:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def execute(self, sql: str, params: Sequence[Any]) -> None:
        self._connection.validate_no_broken_transaction()
        with self._connection.wrap_database_errors:
            self._cursor.execute(_qmark(sql), params)

    def fetchone(self) -> Any:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


@async_unsafe
def statement_cursor(connection: Any = None) -> Any:
    """A cursor for one of these statements (`with statement_cursor() as cursor:`). On SQLite,
    unless queries are being logged (DEBUG, a test capturing them) or watched
    (`connection.execute_wrapper`), the sqlite3 cursor itself (`_SQLiteStatement`); else
    Django's own. `connection`: the thread's (`db_connection()`), when the caller has it."""
    if connection is None:
        connection = db_connection()
    if connection.vendor == "sqlite" and not connection.queries_logged and not connection.execute_wrappers:
        return _SQLiteStatement(connection)
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
Preparer = Callable[[Any, Any], Any]
_SQLITE_SAME: dict[type[Field], type] = {
    # Field class: the Python type whose values SQLite takes as they are (what the field's own
    # `get_db_prep_save` returns for them: `int(v)`, `str(v)`, ...; the backend adapts none).
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.SmallIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveBigIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.FloatField: float,
    models.BooleanField: bool,
    models.CharField: str,
    models.TextField: str,
}


@cache
def preparer(field: Field, vendor: str) -> Preparer:
    """`field.get_db_prep_save`, as `(value, connection)`. On SQLite the commonest values of the
    commonest fields are converted here at once, exactly as the field would convert them (a turn
    prepares about a hundred values, each through three or four of Django's calls); any other
    value, field or database goes through the field's own method. `test_rows` compares both."""
    slow = field.get_db_prep_save
    if vendor != "sqlite":
        return slow
    kind = type(field)
    if kind in _SQLITE_SAME:
        same = _SQLITE_SAME[kind]
        return lambda value, connection: value if type(value) is same else slow(value, connection)
    if kind is models.UUIDField:
        return lambda value, connection: value.hex if type(value) is uuid.UUID else slow(value, connection)
    if kind is models.DateTimeField:

        def datetime_prep(value: Any, connection: Any) -> Any:
            # Aware in UTC, stored naive in the connection's UTC (`adapt_datetimefield_value`).
            if type(value) is datetime and value.tzinfo is UTC and connection.timezone is UTC:
                return str(value.replace(tzinfo=None))
            return slow(value, connection)

        return datetime_prep
    if kind is models.JSONField and field.encoder is None:  # type: ignore[attr-defined]
        return lambda value, connection: (
            json.dumps(value) if type(value) in (dict, list) else slow(value, connection)
        )
    if kind is models.ForeignKey:
        target = preparer(field.target_field, vendor)  # type: ignore[attr-defined]
        # None and "" are the key's own cases (NULL); anything else is the target's value.
        return lambda value, connection: (
            slow(value, connection)
            if value is None or (isinstance(value, str) and value == "")
            else target(value, connection)
        )
    return slow


@cache
def _preparers(model: type[Model], vendor: str) -> list[Preparer]:
    """`preparer` of each field `_insert_sql` inserts, in its order (looked up once per model:
    a field's hash is a Python call, and a turn prepares a hundred values)."""
    return [preparer(f, vendor) for f in _insertable(model)]


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
    for obj in objects:
        obj._state.adding = False
        obj._state.db = connection.alias


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


def _converters(table: str, fields: list[Field]) -> list[tuple[Any, list[Any]]]:
    """Each field's column and the converters its values go through when read (the backend's,
    then the field's own), as the ORM's compiler applies them."""
    connection = db_connection()
    converters = []
    for field in fields:
        column = field.get_col(table)
        converters.append(
            (column, connection.ops.get_db_converters(column) + column.get_db_converters(connection))
        )
    return converters


def _converted(row: Sequence[Any], converters: list[tuple[Any, list[Any]]], connection: Any) -> list[Any]:
    values = []
    for value, (expression, field_converters) in zip(row, converters, strict=True):
        for converter in field_converters:
            value = converter(value, expression, connection)
        values.append(value)
    return values


@cache
def _select_sql(
    model: type[Model], lock: bool, vendor: str, names: tuple[str, ...] | None = None
) -> tuple[str, list[Field], list[tuple[Any, list[Any]]]]:
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
    values = _converted(row, converters, connection)
    attnames = [f.attname for f in fields]
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model.from_db(DEFAULT_DB_ALIAS, attnames, values)
    # What `from_db` builds, without `Model.__init__`'s walk over every field (most of them
    # deferred here): the values read, by attname, and the state of an instance loaded from
    # the database. Only with no receiver of the init signals, which `__init__` would send.
    instance = model.__new__(model)
    instance.__dict__.update(zip(attnames, values, strict=True))
    state = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    instance._state = state
    return instance


@cache
def _read_converters(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[list[Field], list[tuple[Any, list[Any]]]]:
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
    return fields, _converted(row, converters, connection)


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
        preparer(f, vendor)(value, connection) for f, value in zip(fields, assign.values(), strict=True)
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
) -> tuple[str, list[Field], list[tuple[Any, list[Any]]]]:
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
    return [tuple(_converted(row, converters, connection)) for row in rows]


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
