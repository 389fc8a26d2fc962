"""Every use of a framework's internals, in one module: what the fast path (`fastpath/`), the
engine's database threads (`common/db.py`) and the websockets' flow control (`agent_ws/flow.py`)
rely on beyond the frameworks' documented APIs (a private attribute, an undocumented method or
behaviour, a thread-local, the raw database cursor, another package's objects looked into).

Written for, and checked against:

- Django 5.2.19
- Channels 4.3.2
- daphne 4.2.3, over autobahn 26.10.2 and Twisted 26.10.0
- asgiref 3.13.0
- Python 3.11 (`sqlite3`, `concurrent.futures`)

Each function or class below names the assumption it relies on, and
`tests/sessions_app/fastpath/test_compat.py` checks each one against the installed packages: an
upgrade that breaks one fails a test there instead of degrading quietly. On an upgrade, run it;
where a check fails, re-read the upstream code it names, adapt the code here, and update the
versions above.

This module imports only the standard library, Django and asgiref. The engine reaches it
(through `fastpath.rows` and `common.db`) and must not load Channels (docs/architecture.md), so
what it assumes of Channels, daphne and Twisted it assumes by looking at their objects, and the
tests check that against the real classes.

Not here: the APIs that are documented (a model's `_meta` API, `Model.from_db`, a field's
`get_db_prep_save`/`get_db_prep_value`/`pre_save`, `connection.execute_wrapper`), and the
database backend API that every backend implements and the ORM's own compiler uses
(`connection.ops.quote_name`, `connection.features`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cache, lru_cache, partial
from time import monotonic
from typing import Any, TypeVar

from asgiref.sync import SyncToAsync
from django.db import models
from django.db.models import Field, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils.asyncio import async_unsafe as django_async_unsafe

M = TypeVar("M", bound=Model)

# ---------------------------------------------------------------------------
# Django: statements on SQLite's own cursor
# ---------------------------------------------------------------------------
# `django.utils.asyncio.async_unsafe` (undocumented): raise SynchronousOnlyOperation when called
# from a running event loop, as Django's own cursor does.
async_unsafe = django_async_unsafe

# Django's placeholder rewrite for SQLite (`SQLiteCursorWrapper.convert_query` with positional
# parameters: its `FORMAT_QMARK_REGEX`, then `%%` to `%`).
_FORMAT_QMARK = re.compile(r"(?<!%)%s")


@lru_cache(maxsize=1024)
def sqlite_qmark(sql: str) -> str:
    """`sql` with Django's `%s` placeholders as sqlite3's `?`, exactly as Django's
    `SQLiteCursorWrapper.convert_query` rewrites it (once per statement shape here)."""
    return _FORMAT_QMARK.sub("?", sql).replace("%%", "%")


def sqlite_direct_allowed(connection: Any) -> bool:
    """Whether a statement may skip Django's cursor on `connection`: SQLite, queries not being
    logged (DEBUG, a test capturing them: `queries_logged`) and no `execute_wrapper` installed
    (`execute_wrappers`, the list that `connection.execute_wrapper()` appends to)."""
    return connection.vendor == "sqlite" and not connection.queries_logged and not connection.execute_wrappers


class SQLiteStatement:
    """The thread's sqlite3 cursor without Django's wrappers around each statement (its cursor
    object, the debug and execute wrappers, the placeholder rewrite: ~17 µs a statement, a turn
    runs ~20 of them): the same SQL and values, the same transaction rules, Django's exceptions.

    Assumes of Django's connection wrapper (`BaseDatabaseWrapper`): `close_if_health_check_failed()`
    and `ensure_connection()` do what a cursor's creation does first; `connection` is the
    sqlite3 connection Django itself uses, opened with the database's OPTIONS (so a statement
    here waits for SQLite's lock as long as Django's do, `timeout`, and runs inside whatever
    transaction Django began, `BEGIN IMMEDIATE` by config/settings.py); a statement refuses to
    run in a transaction an error broke (`validate_no_broken_transaction()`), and
    `wrap_database_errors` turns sqlite3's errors into Django's (IntegrityError, ...) and marks
    the transaction broken as Django's cursor does.
    """

    __slots__ = ("_connection", "_cursor")

    def __init__(self, connection: Any) -> None:
        connection.close_if_health_check_failed()
        if connection.connection is None:
            connection.ensure_connection()
        self._connection = connection
        self._cursor = connection.connection.cursor()

    def __enter__(self) -> SQLiteStatement:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def execute(self, sql: str, params: Sequence[Any]) -> None:
        self._connection.validate_no_broken_transaction()
        with self._connection.wrap_database_errors:
            self._cursor.execute(sqlite_qmark(sql), params)

    def fetchone(self) -> Any:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self._connection.wrap_database_errors:
            return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


# ---------------------------------------------------------------------------
# Django: values as the database takes them, and back
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
def field_preparer(field: Field, vendor: str) -> Preparer:
    """`field.get_db_prep_save`, as `(value, connection)`. On SQLite the commonest values of the
    commonest fields are converted here at once (a turn prepares about a hundred values, each
    through three or four of Django's calls); any other value, field or database goes through
    the field's own method.

    Assumes what Django's fields and SQLite backend return for those values (undocumented):
    numbers, booleans and strings unchanged; a UUID as its 32 hex digits (SQLite has no UUID
    type); an aware datetime in UTC as the text of its naive UTC value (the connection's time
    zone UTC: `adapt_datetimefield_value`); a dict or list of a JSONField without an encoder as
    `json.dumps(value)`; a foreign key's value as its target field prepares it."""
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
        target = field_preparer(field.target_field, vendor)  # type: ignore[attr-defined]
        # None and "" are the key's own cases (NULL); anything else is the target's value.
        return lambda value, connection: (
            slow(value, connection)
            if value is None or (isinstance(value, str) and value == "")
            else target(value, connection)
        )
    return slow


Converters = list[tuple[Any, list[Any]]]


def read_converters(table: str, fields: Sequence[Field], connection: Any) -> Converters:
    """Each field's column expression and the converters its values go through when read: the
    backend's, then the field's own, as the ORM's compiler applies them
    (`SQLCompiler.get_converters`). Assumes `Field.get_col(alias)`,
    `connection.ops.get_db_converters(expression)` and `expression.get_db_converters(connection)`,
    and that each converter is called `(value, expression, connection)` (`values_converted`)."""
    converters = []
    for field in fields:
        column = field.get_col(table)
        converters.append(
            (column, connection.ops.get_db_converters(column) + column.get_db_converters(connection))
        )
    return converters


def values_converted(row: Sequence[Any], converters: Converters, connection: Any) -> list[Any]:
    """`row`'s values as the ORM reads them, through `read_converters`' converters."""
    values = []
    for value, (expression, field_converters) in zip(row, converters, strict=True):
        for converter in field_converters:
            value = converter(value, expression, connection)
        values.append(value)
    return values


# ---------------------------------------------------------------------------
# Django: model instances built outside the ORM
# ---------------------------------------------------------------------------
def instance_from_db(model: type[M], attnames: list[str], values: list[Any], alias: str) -> M:
    """What `model.from_db(alias, attnames, values)` builds from a partial row (the other fields
    deferred), without `Model.__init__`'s walk over every field, most of them deferred here.

    Assumes Django's instance loaded from the database is just this (`Model.from_db` with
    `Model.__init__`): each loaded field's value in `__dict__` by attname, a deferred field
    absent from it (read on access), and a fresh `ModelState` (`django.db.models.base`, no
    public constructor) with `adding` False and `db` the alias. `__init__` also sends
    `pre_init` and `post_init`: with a receiver connected, `from_db` itself builds it."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model.from_db(alias, attnames, values)
    instance = model.__new__(model)
    instance.__dict__.update(zip(attnames, values, strict=True))
    state = ModelState()
    state.adding = False
    state.db = alias
    instance._state = state
    return instance


def instances_saved(instances: Sequence[Model], alias: str) -> None:
    """Mark instances inserted outside the ORM as `save()` leaves them: `_state.adding` False
    and `_state.db` the alias (Django's documented `Model._state`, a leading-underscore name)."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = alias


# ---------------------------------------------------------------------------
# Django: connection health checks
# ---------------------------------------------------------------------------
def connection_health_check_skip(conn: Any) -> None:
    """Count `conn` (a connection wrapper) as checked, so its next query does not check it again
    (where `conn_health_checks` is on). Assumes Django's `health_check_enabled` and
    `health_check_done` (4.1+): `close_if_health_check_failed`, before a query, checks the
    connection (`is_usable()`) only while `health_check_done` is False, and
    `close_old_connections` sets it to False (`close_if_unusable_or_obsolete`)."""
    if conn.connection is not None and conn.health_check_enabled:
        conn.health_check_done = True


# ---------------------------------------------------------------------------
# Python: a thread pool's size
# ---------------------------------------------------------------------------
def executor_workers(pool: ThreadPoolExecutor) -> int:
    """The most threads `pool` runs: `ThreadPoolExecutor._max_workers`, set by its constructor."""
    return int(pool._max_workers)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# asgiref: the event loop behind a database thread
# ---------------------------------------------------------------------------
def sync_thread_event_loop() -> Any:
    """The event loop whose `sync_to_async` call is running in this thread, or None (any other
    thread). Assumes asgiref's `SyncToAsync.threadlocal.main_event_loop`, which `SyncToAsync`
    sets in the thread before it runs the function (for `async_to_sync` calls back into that
    loop) and which stays set in a pool thread afterwards (callers check the loop runs)."""
    return getattr(SyncToAsync.threadlocal, "main_event_loop", None)


# ---------------------------------------------------------------------------
# Channels: a consumer's messages, and the in-memory channel layer
# ---------------------------------------------------------------------------
def consumer_handler_name(message: dict[str, Any]) -> str:
    """The consumer method that handles `message`: Channels' `channels.consumer.get_handler_name`
    (its type with dots as underscores; no type, or a leading underscore, is a ValueError),
    written here so that this module imports nothing of Channels."""
    if "type" not in message:
        raise ValueError("Incoming message has no 'type' attribute")
    name = message["type"].replace(".", "_")
    if name.startswith("_"):
        raise ValueError("Malformed type in message (leading underscore)")
    return str(name)


class LoopDispatch:
    """Put first in a consumer's bases: its messages go straight to their handlers.

    Channels (4.2 and later) awaits `aclose_old_connections()` before every message a consumer
    handles: a `sync_to_async` call on Django's one shared thread, for each websocket frame
    received and for each channel-layer event delivered. A session's turn delivers half a dozen
    events to each watching connection, so with hundreds of sessions every event of every
    connection waited in line on that one thread, for a cleanup our consumers do not need: their
    database work goes through `database_sync_to_async` (which closes stale connections in the
    thread where it runs, before and after) or the engine's `db` (before each call, in its
    thread).

    Assumes Channels' `AsyncConsumer.__call__` hands every message (the client's and the channel
    layer's) to `self.dispatch`, and that `AsyncConsumer.dispatch` does nothing but find the
    handler (`get_handler_name`), make that hop and await the handler.
    """

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, consumer_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class InMemoryLayerCleaning:
    """Put before Channels' `InMemoryChannelLayer` in a layer's bases: its cleaning of expired
    messages and memberships runs at most once every `clean_interval` seconds instead of on
    every `receive` and `group_send`, and deletes the groups it leaves empty.

    Assumes `InMemoryChannelLayer` calls `self._clean_expired()` on every `receive` and
    `group_send`, which drops expired messages with their channels' memberships (and
    memberships older than `group_expiry`) and nothing else, and keeps its groups in
    `self.groups` as `{group: {channel: joined_at}}`.
    """

    clean_interval: float = 1.0
    groups: dict[str, dict[str, float]]
    _cleaned_at: float = float("-inf")

    def _clean_expired(self) -> None:
        now = monotonic()
        if now - self._cleaned_at < self.clean_interval:
            return
        self._cleaned_at = now
        super()._clean_expired()  # type: ignore[misc]
        # Channels' cleaning leaves a group behind, empty, once it dropped its last member.
        for group in [name for name, members in self.groups.items() if not members]:
            del self.groups[group]

    def expired_clean(self) -> None:
        """Clean now if `clean_interval` has passed (what the layer's own sends and receives do)."""
        self._clean_expired()

    def group_members(self, group: str) -> list[str]:
        """The channels in `group` now (a copy: sending may change the group)."""
        return list(self.groups.get(group, ()))


# ---------------------------------------------------------------------------
# daphne and Twisted: the connection behind an ASGI `send`
# ---------------------------------------------------------------------------
# How many wrappers of `send` to look through (Channels' session middleware adds one).
MAX_SEND_WRAPPERS = 8


def daphne_protocol(send: Any) -> Any:
    """The daphne protocol object behind an ASGI `send`, or None (another server, Channels'
    test communicator).

    Assumes daphne hands each application `functools.partial(server.handle_reply, protocol)` as
    its `send` (`Server.create_application`), whose websocket protocol (autobahn's, on Twisted)
    has `registerProducer` and its TCP `transport`; and that Channels' session middleware (in
    `AuthMiddlewareStack`) wraps `send` in a method of an object that keeps the original as
    `real_send` (`InstanceSessionWrapper`). Anything else is not looked into.
    """
    for _ in range(MAX_SEND_WRAPPERS):
        if isinstance(send, partial) and send.args:
            protocol = send.args[0]
            if callable(getattr(protocol, "registerProducer", None)) and hasattr(protocol, "transport"):
                return protocol
            return None
        send = getattr(getattr(send, "__self__", None), "real_send", None)
        if send is None:
            return None
    return None


def transport_producer(transport: Any) -> tuple[Any, bool]:
    """The producer registered on a Twisted transport (None if none) and whether it is a
    streaming (push) producer: `FileDescriptor.producer` and `.streamingProducer`, attributes
    of Twisted's transports outside the `ITransport` interface."""
    return getattr(transport, "producer", None), bool(getattr(transport, "streamingProducer", True))
