"""`sessions_app/fastpath/compat.py`'s assumptions about the frameworks' internals, each checked
against the installed Django, Channels, daphne, Twisted and asgiref: an upgrade that breaks one
fails here instead of degrading quietly (the raw cursor, partial instances, value preparers,
health checks, the `sync_to_async` thread-local, the consumers' dispatch, the in-memory layer's
cleaning, the transport behind an ASGI `send`).

Where compat replaces or copies a framework's code, the test holds that code as it was when
compat was written (`UPSTREAM_*`) and compares it with the installed one, layout, comments and
docstrings aside: when it changes, re-read it, adapt compat, then update the copy here.
"""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
import inspect
import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.consumer import AsyncConsumer, get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import InMemoryChannelLayer
from channels.testing import WebsocketCommunicator
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings
from django.db import IntegrityError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.base import SQLiteCursorWrapper
from django.db.models import Model
from django.db.models.signals import post_init
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.functional import lazy
from twisted.internet.abstract import FileDescriptor

from sessions_app.engine import sessions as engine_sessions
from sessions_app.fastpath import compat
from sessions_app.fastpath.rows import (
    object_fields,
    object_from_row,
    object_update,
    objects_insert,
    values_where,
)
from sessions_app.models import AgentSession, Message, ModelCall, SessionEvent, ToolCall, Turn


def _code(source: str) -> str:
    """A function's code as Python formats it, its docstring and comments dropped."""
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    if ast.get_docstring(node) is not None:
        node.body = node.body[1:]
    return ast.unparse(node)


def _installed(obj: object) -> str:
    return _code(inspect.getsource(obj))  # type: ignore[arg-type]


def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own cursor")


# -- Django: statements on SQLite's own cursor -----------------------------------------------
UPSTREAM_CONVERT_QUERY = """
def convert_query(self, query, *, param_names=None):
    if param_names is None:
        return FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")
    else:
        return query % {name: f":{name}" for name in param_names}
"""


def test_djangos_sqlite_placeholder_rewrite_is_the_one_compat_copies():
    assert _installed(SQLiteCursorWrapper.convert_query) == _code(UPSTREAM_CONVERT_QUERY)
    for sql in ["SELECT %s", "a = %s AND b LIKE '%%x'", "%%s stays", "x = %s, y = %s", "no params"]:
        assert compat.sqlite_qmark(sql) == SQLiteCursorWrapper.convert_query(None, sql)  # type: ignore[arg-type]


def test_djangos_connection_wrapper_has_what_the_raw_statement_uses():
    for name in (
        "close_if_health_check_failed",
        "ensure_connection",
        "validate_no_broken_transaction",
        "execute_wrapper",
    ):
        assert callable(getattr(BaseDatabaseWrapper, name)), name
    wrapper = connections["default"]
    assert isinstance(wrapper.execute_wrappers, list)
    assert isinstance(wrapper.queries_logged, bool)
    assert hasattr(wrapper.wrap_database_errors, "__enter__")
    with wrapper.execute_wrapper(lambda execute, *args: execute(*args)):
        assert wrapper.execute_wrappers and not compat.sqlite_direct_allowed(wrapper)


@pytest.mark.django_db
def test_statements_on_sqlite_skip_djangos_cursor_unless_queries_are_logged(monkeypatch):
    """The turn's statements run on the sqlite3 cursor itself (Django's wrappers cost more than
    most of them); with queries logged (DEBUG, a test capturing them) or watched (an execute
    wrapper) they go through Django's cursor, and are seen."""
    if connection.vendor != "sqlite":
        pytest.skip("the direct cursor is SQLite's")
    session = engine_sessions.session_create(owner=None, model="scripted")
    where = (("session_id", "="),)

    def refused(*args, **kwargs):
        raise AssertionError("Django's cursor was used")

    with monkeypatch.context() as patched:
        patched.setattr(type(connections["default"]), "cursor", refused)
        assert values_where(Message, ("position",), where, (session.id,)) == []
    with CaptureQueriesContext(connection) as captured:
        values_where(Message, ("position",), where, (session.id,))
    assert [q["sql"] for q in captured.captured_queries if "sessions_app_message" in q["sql"]]
    watched: list[str] = []

    def watch(execute, sql, params, many, context):
        watched.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        values_where(Message, ("position",), where, (session.id,))
    assert [sql for sql in watched if "sessions_app_message" in sql]


@pytest.mark.django_db
def test_a_failed_statement_raises_djangos_error_and_breaks_the_transaction_as_djangos_does():
    session = engine_sessions.session_create(owner=None, model="scripted")
    objects_insert([Message(session=session, position=0, epoch=0, role="user", content=[])])
    with pytest.raises(IntegrityError), transaction.atomic():
        objects_insert([Message(session=session, position=0, epoch=0, role="user", content=[])])
    with transaction.atomic():
        with pytest.raises(IntegrityError), transaction.atomic(savepoint=False):
            objects_insert([Message(session=session, position=0, epoch=0, role="user", content=[])])
        with pytest.raises(TransactionManagementError):
            values_where(Message, ("position",), (("session_id", "="),), (session.id,))
    assert values_where(Message, ("position",), (("session_id", "="),), (session.id,)) == [(0,)]


@pytest.mark.django_db
def test_the_raw_cursor_is_djangos_own_sqlite_connection_with_its_options():
    """The raw statements wait for SQLite's lock as long as Django's (the OPTIONS timeout) and
    run in WAL mode: they are on the very connection Django opened with the settings."""
    _sqlite_only()
    connection.ensure_connection()
    with compat.SQLiteStatement(connection) as cursor:
        assert cursor._cursor.connection is connection.connection
        cursor.execute("PRAGMA busy_timeout", [])
        assert cursor.fetchone()[0] == settings.DATABASES["default"]["OPTIONS"]["timeout"] * 1000
        cursor.execute("PRAGMA journal_mode", [])
        assert cursor.fetchone()[0] == "wal"


@pytest.mark.django_db(transaction=True)
def test_a_transaction_on_sqlite_takes_the_write_lock_at_begin():
    """Django begins `transaction_mode` (IMMEDIATE): a transaction's raw writes already hold
    SQLite's write lock, so none of them can meet a lock half-way."""
    _sqlite_only()
    begun: list[str] = []

    def watch(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        begun.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch), transaction.atomic():
        AgentSession.objects.exists()
    assert begun[0] == "BEGIN IMMEDIATE"


@pytest.mark.django_db(transaction=True)
def test_a_raw_write_waits_for_another_writer_instead_of_failing():
    """Outside a transaction a raw write waits for the write lock (the connection's busy
    timeout), as Django's own statements do: a lock held by another thread is not an error."""
    _sqlite_only()
    session = engine_sessions.session_create(owner=None, model="scripted")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                AgentSession.objects.filter(pk=session.id).update(title="first")
                holding.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    assert object_update(AgentSession, session.id, title="second") == 1
    assert time.monotonic() - started >= 0.2
    holder.join(10)
    assert AgentSession.objects.get(pk=session.id).title == "second"


# -- Django: model instances built outside the ORM -------------------------------------------
UPSTREAM_FROM_DB = """
@classmethod
def from_db(cls, db, field_names, values):
    if len(values) != len(cls._meta.concrete_fields):
        values_iter = iter(values)
        values = [
            next(values_iter) if f.attname in field_names else DEFERRED
            for f in cls._meta.concrete_fields
        ]
    new = cls(*values)
    new._state.adding = False
    new._state.db = db
    return new
"""


def test_djangos_from_db_is_the_one_compat_builds_without_init():
    assert _installed(Model.from_db.__func__) == _code(UPSTREAM_FROM_DB)  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_a_partial_row_from_an_update_is_what_from_db_builds(monkeypatch):
    """`object_from_row` builds its partial instance without `Model.__init__` unless something
    listens to the init signals: the same values, deferred fields, state and behaviour as
    `from_db`'s, and `from_db` itself when a receiver is connected."""
    session = engine_sessions.session_create(owner=None, settings={"notepad": {"enabled": True}})
    AgentSession.objects.filter(pk=session.id).update(notepad="note")
    names = object_fields(AgentSession, ("id", "epoch", "settings", "notepad", "parent_session_id"))
    fields = {key: f for f in AgentSession._meta.concrete_fields for key in (f.name, f.attname)}
    columns = ", ".join(connection.ops.quote_name(str(fields[n].column)) for n in names)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM sessions_app_agentsession WHERE id = %s", [session.id.hex])
        row = cursor.fetchone()

    def built() -> AgentSession:
        return object_from_row(AgentSession, names, row, connection)

    def by_from_db() -> AgentSession:
        orm = AgentSession.objects.only(*names).get(pk=session.id)
        assert orm.get_deferred_fields(), "the ORM's instance should be partial too"
        return orm

    fast, orm = built(), by_from_db()
    assert type(fast) is AgentSession

    def loaded(instance: AgentSession) -> dict:
        return {k: v for k, v in vars(instance).items() if k != "_state"}

    # Compared before any attribute is read: reading a deferred one loads it.
    assert loaded(fast) == loaded(orm) and set(loaded(fast)) == {fields[n].attname for n in names}
    assert {n: getattr(fast, n) for n in names} == {n: getattr(orm, n) for n in names}
    assert fast.pk == session.id and fast.settings["notepad"]["enabled"] is True
    assert fast.get_deferred_fields() == orm.get_deferred_fields()
    assert (fast._state.adding, fast._state.db) == (False, "default")
    assert fast.title == orm.title  # a deferred field loads on access, as the ORM's does
    assert fast.parent_session is None
    seen: list[object] = []

    def receiver(sender: type, instance: object, **kwargs: object) -> None:
        seen.append(instance)

    post_init.connect(receiver, sender=AgentSession)
    try:
        signalled = built()
    finally:
        post_init.disconnect(receiver, sender=AgentSession)
    assert seen == [signalled]
    assert {n: getattr(signalled, n) for n in names} == {n: getattr(orm, n) for n in names}


@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")
def test_preparers_convert_values_as_the_fields_do():
    """`compat.field_preparer`'s shortcuts give what each field's own `get_db_prep_save` gives, for the
    values the step path writes and for the ones it leaves to the field (of other types, naive
    or non-UTC times, None, empty strings, lazy strings)."""
    lazy_text = lazy(lambda: "lazy", str)()
    samples: list[object] = [
        None,
        "",
        "text é",
        lazy_text,
        0,
        7,
        -3,
        True,
        False,
        1.5,
        2.0,
        uuid.uuid4(),
        str(uuid.uuid4()),
        timezone.now(),
        dt.datetime(2026, 1, 2, 3, 4, 5),
        dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC),
        {"a": [1, "ü", None]},
        [{"type": "text", "text": "x"}],
        ["a"],
        {},
    ]
    checked = 0
    for model in (AgentSession, Turn, Message, SessionEvent, ModelCall, ToolCall):
        for field in model._meta.concrete_fields:
            prepare = compat.field_preparer(field, connection.vendor)
            for value in samples:
                try:
                    expected = field.get_db_prep_save(value, connection)
                except Exception as exc:
                    with pytest.raises(type(exc)):
                        prepare(value, connection)
                    continue
                got = prepare(value, connection)
                if hasattr(expected, "obj"):  # psycopg's adapters (jsonb) compare by what they wrap
                    got, expected = (type(got), got.obj), (type(expected), expected.obj)
                assert (type(got), got) == (type(expected), expected), (model.__name__, field.name, value)
                checked += 1
    assert checked > 500


@pytest.mark.django_db
def test_instances_saved_are_as_djangos_save_leaves_them():
    session = engine_sessions.session_create(owner=None, model="scripted")
    turn = Turn(id=uuid.uuid4(), session_id=session.id)
    assert turn._state.adding
    objects_insert([turn])
    saved = Turn(session_id=session.id)
    saved.save()
    assert (
        (turn._state.adding, turn._state.db) == (saved._state.adding, saved._state.db) == (False, "default")
    )


# -- Django: connection health checks ---------------------------------------------------------
UPSTREAM_HEALTH_CHECK = """
def close_if_health_check_failed(self):
    if self.connection is None or not self.health_check_enabled or self.health_check_done:
        return
    if not self.is_usable():
        self.close()
    self.health_check_done = True
"""


def test_djangos_health_check_is_the_one_compat_skips():
    assert _installed(BaseDatabaseWrapper.close_if_health_check_failed) == _code(UPSTREAM_HEALTH_CHECK)


@pytest.mark.django_db(transaction=True)
def test_a_connection_counted_as_checked_is_not_checked_before_its_next_query(monkeypatch):
    wrapper = connections["default"]
    wrapper.ensure_connection()
    checks: list[int] = []
    monkeypatch.setattr(wrapper, "health_check_enabled", True)

    def is_usable() -> bool:
        checks.append(1)
        return True

    monkeypatch.setattr(wrapper, "is_usable", is_usable)
    wrapper.close_if_unusable_or_obsolete()  # what close_old_connections does between calls
    assert wrapper.health_check_done is False  # type: ignore[attr-defined]
    compat.connection_health_check_skip(wrapper)
    wrapper.close_if_health_check_failed()
    assert checks == []
    wrapper.close_if_unusable_or_obsolete()
    wrapper.close_if_health_check_failed()
    assert checks == [1]


def test_a_thread_pools_size_is_its_max_workers():
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert compat.executor_workers(pool) == 3


# -- asgiref: the event loop behind a database thread -------------------------------------------
async def test_a_sync_to_async_thread_knows_the_event_loop_that_called_it():
    loop = asyncio.get_running_loop()
    assert await sync_to_async(compat.sync_thread_event_loop, thread_sensitive=False)() is loop
    assert await sync_to_async(compat.sync_thread_event_loop, thread_sensitive=True)() is loop
    with ThreadPoolExecutor(max_workers=1) as pool:
        called = sync_to_async(compat.sync_thread_event_loop, thread_sensitive=False, executor=pool)
        assert await called() is loop
    elsewhere: list[object] = []
    thread = threading.Thread(target=lambda: elsewhere.append(compat.sync_thread_event_loop()))
    thread.start()
    thread.join()
    assert elsewhere == [None]


# -- Channels: a consumer's messages ---------------------------------------------------------
UPSTREAM_GET_HANDLER_NAME = """
def get_handler_name(message):
    if "type" not in message:
        raise ValueError("Incoming message has no 'type' attribute")
    handler_name = message["type"].replace(".", "_")
    if handler_name.startswith("_"):
        raise ValueError("Malformed type in message (leading underscore)")
    return handler_name
"""
UPSTREAM_DISPATCH = """
async def dispatch(self, message):
    handler = getattr(self, get_handler_name(message), None)
    if handler:
        await aclose_old_connections()
        await handler(message)
    else:
        raise ValueError("No handler for message type %s" % message["type"])
"""


def test_channels_handler_names_are_the_ones_compat_gives():
    assert _installed(get_handler_name) == _code(UPSTREAM_GET_HANDLER_NAME)
    for message in ({"type": "websocket.receive"}, {"type": "session.events"}, {"type": "a.b.c"}):
        assert compat.consumer_handler_name(message) == get_handler_name(message)
    for bad in ({}, {"type": "_private"}, {"type": ".dotted"}):
        with pytest.raises(ValueError):
            get_handler_name(bad)
        with pytest.raises(ValueError):
            compat.consumer_handler_name(bad)


def test_channels_dispatch_is_the_one_loop_dispatch_replaces():
    assert _installed(AsyncConsumer.dispatch) == _code(UPSTREAM_DISPATCH)


class _Probe(compat.LoopDispatch, AsyncWebsocketConsumer):
    dispatched: list[str] = []

    async def dispatch(self, message: dict) -> None:
        self.dispatched.append(message["type"])
        await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.send(text_data=text_data)


@pytest.mark.django_db(transaction=True)  # Channels' own disconnect handler closes old connections
async def test_channels_hands_every_message_to_the_consumers_dispatch(monkeypatch):
    """The override is reached (Channels' `__call__` calls `self.dispatch`), and Channels'
    hop to the shared thread is not taken."""
    import channels.consumer

    hops: list[int] = []

    async def hop() -> None:
        hops.append(1)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", hop)
    _Probe.dispatched = []
    communicator = WebsocketCommunicator(_Probe.as_asgi(), "/")
    assert (await communicator.connect())[0]
    await communicator.send_to(text_data="echo")
    assert await communicator.receive_from() == "echo"
    assert _Probe.dispatched == ["websocket.connect", "websocket.receive"]
    assert hops == []
    await communicator.disconnect()


# -- Channels: the in-memory channel layer ------------------------------------------------------
UPSTREAM_GROUP_SEND = """
async def group_send(self, group, message):
    assert isinstance(message, dict), "Message is not a dict"
    self.require_valid_group_name(group)
    self._clean_expired()
    ops = []
    if group in self.groups:
        for channel in self.groups[group].keys():
            ops.append(asyncio.create_task(self.send(channel, message)))
    for send_result in asyncio.as_completed(ops):
        try:
            await send_result
        except ChannelFull:
            pass
"""


def test_channels_group_send_is_the_one_the_throttled_layer_replaces():
    assert _installed(InMemoryChannelLayer.group_send) == _code(UPSTREAM_GROUP_SEND)


async def test_channels_in_memory_layer_cleans_on_every_receive_and_group_send(monkeypatch):
    layer = InMemoryChannelLayer()
    cleaned: list[int] = []
    monkeypatch.setattr(layer, "_clean_expired", lambda: cleaned.append(1))
    channel = await layer.new_channel()
    await layer.group_add("session", channel)
    assert layer.groups == {"session": {channel: pytest.approx(time.time(), abs=60)}}
    await layer.group_send("session", {"type": "event"})
    assert cleaned == [1]
    assert (await layer.receive(channel))["type"] == "event"
    assert cleaned == [1, 1]


async def test_channels_cleaning_drops_an_expired_channel_from_its_groups():
    layer = InMemoryChannelLayer(expiry=0.01)
    channel = await layer.new_channel()
    await layer.group_add("session", channel)
    await layer.send(channel, {"type": "unread"})
    await asyncio.sleep(0.05)
    layer._clean_expired()
    assert layer.groups == {"session": {}} and channel not in layer.channels


# -- daphne and Twisted: the connection behind an ASGI `send` -------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_daphnes_protocol_is_found_behind_the_send_our_stack_gets():
    """A real daphne server makes the application instance of a websocket protocol, through
    the auth stack of config/asgi.py: compat finds that protocol behind the `send` received."""
    sends: list[object] = []

    async def application(scope: dict, receive: object, send: object) -> None:
        sends.append(send)

    server = Server(application=AuthMiddlewareStack(application), endpoints=["tcp:port=0"])
    protocol = WebSocketProtocol()
    server.connections = {protocol: {}}
    scope = {"type": "websocket", "path": "/", "headers": [], "query_string": b""}
    server.create_application(protocol, scope)
    for _ in range(100):
        if sends:
            break
        await asyncio.sleep(0.01)
    assert compat.daphne_protocol(sends[0]) is protocol
    assert callable(protocol.registerProducer)


def test_twisted_transports_show_their_producer():
    class Producer:
        def pauseProducing(self) -> None: ...  # noqa: N802

        def resumeProducing(self) -> None: ...  # noqa: N802

        def stopProducing(self) -> None: ...  # noqa: N802

    transport = FileDescriptor(reactor=object())  # type: ignore[arg-type]
    transport.connected = 1
    assert compat.transport_producer(transport) == (None, False)
    producer = Producer()
    transport.registerProducer(producer, True)  # type: ignore[arg-type]
    assert compat.transport_producer(transport) == (producer, True)
    transport.unregisterProducer()
    assert compat.transport_producer(transport) == (None, True)
