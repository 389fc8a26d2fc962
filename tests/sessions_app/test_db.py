"""Running the ORM from the engine: long work does not hold up the shared database thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sessions_app.common.db import db, db_heavy
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession

pytestmark = pytest.mark.django_db(transaction=True)


async def test_heavy_work_leaves_the_shared_thread_free():
    released = threading.Event()

    def heavy() -> bool:
        # Finishes only once the quick call below has run: were both on one thread, the quick
        # call would wait behind this one and the event would never be set.
        return released.wait(timeout=5)

    def quick() -> int:
        count = AgentSession.objects.count()
        released.set()
        return count

    heavy_task = asyncio.ensure_future(db_heavy(heavy)())
    assert await asyncio.wait_for(db(quick)(), timeout=5) == 0
    assert await heavy_task is True


async def test_heavy_work_reads_the_database_on_its_own_connection():

    session = await db(engine_sessions.session_create)(owner=None)
    assert await db_heavy(lambda: AgentSession.objects.get(pk=session.id).model)() == session.model


def _counted_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each health check (`is_usable`) of a connection, by the name of the thread it ran in."""
    from django.db import connections

    checks: list[str] = []
    wrapper = type(connections["default"])
    real = wrapper.is_usable

    def counting(self) -> bool:
        checks.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(wrapper, "is_usable", counting)
    return checks


def _count_with_checks_on() -> int:
    from django.db import connections

    # As PostgreSQL's `conn_health_checks` sets it at connecting (SQLite's settings leave it off).
    connections["default"].ensure_connection()
    connections["default"].health_check_enabled = True  # type: ignore[attr-defined]
    return AgentSession.objects.count()


async def test_a_connection_used_moments_ago_is_not_checked_again(monkeypatch):
    """A database thread's connection that just answered is not checked before its next call
    (Django would send a `SELECT 1` before each); one idle for longer is."""
    from sessions_app.common import db as engine_db

    checks = _counted_checks(monkeypatch)
    await engine_db.db_lease(_count_with_checks_on)()  # the lease thread: one thread, one connection
    checks.clear()
    await engine_db.db_lease(_count_with_checks_on)()
    assert checks == []
    monkeypatch.setattr(engine_db, "HEALTH_CHECK_BYPASS_SECONDS", 0.0)
    await engine_db.db_lease(_count_with_checks_on)()
    assert checks == ["palimpsest-lease_0"]


@pytest.mark.services
async def test_a_connection_the_server_dropped_while_idle_is_replaced(monkeypatch):
    """On PostgreSQL: a connection idle past the bypass, closed by the server meanwhile, is found
    dead by its check and replaced before the call's query; the call succeeds."""
    from django.db import connection

    from sessions_app.common import db as engine_db

    monkeypatch.setattr(engine_db, "HEALTH_CHECK_BYPASS_SECONDS", 0.05)

    def backend() -> int:
        AgentSession.objects.count()
        return connection.connection.info.backend_pid

    def terminate(pid: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

    first = await engine_db.db_lease(backend)()
    await db_heavy(terminate)(first)
    await asyncio.sleep(0.1)
    second = await engine_db.db_lease(backend)()
    assert second != first


async def test_the_database_threads_close_their_connections_when_asked(settings):
    """At a test session's end each database thread closes its own connection (the database can
    then be dropped); the next call starts the threads again."""
    import time

    from django.db import connections

    from sessions_app.common import db as engine_db

    def connection_in_use() -> tuple[int, Any]:
        wrapper = connections["default"]
        wrapper.ensure_connection()
        time.sleep(0.05)  # both threads busy at once: each opens its own
        return threading.get_ident(), wrapper

    seen = dict(await asyncio.gather(*(db(connection_in_use)() for _ in range(4))))
    assert len(seen) == settings.PALIMPSEST_DB_THREADS
    assert all(wrapper.connection is not None for wrapper in seen.values())
    await asyncio.to_thread(engine_db.db_threads_close)
    assert all(wrapper.connection is None for wrapper in seen.values())
    assert engine_db._pool is None
    assert await db(lambda: AgentSession.objects.count())() == 0
