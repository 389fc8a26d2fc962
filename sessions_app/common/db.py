"""Running the synchronous ORM from the async engine."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections

from sessions_app.fastpath.compat import connection_health_check_skip, executor_workers

P = ParamSpec("P")
R = TypeVar("R")


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def db_pool() -> ThreadPoolExecutor | None:
    """The engine's database threads (`PALIMPSEST_DB_THREADS`; 0: Django's one shared thread)."""
    global _pool
    size = settings.PALIMPSEST_DB_THREADS
    if size <= 0:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="palimpsest-db")
        return _pool


def db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run `fn` in one of the engine's database threads, dropping stale connections around it
    (as Channels' `database_sync_to_async` does, without importing Channels into the engine).

    The threads are a bounded pool (`PALIMPSEST_DB_THREADS`), each with its own connection, so
    one session's writes do not wait in line behind every other session's on Django's single
    shared thread. `fn` is one call in one thread: a transaction opens and ends inside it.
    """

    inner = _stale_connections_closed(fn)
    pool = db_pool()
    if pool is None:
        return sync_to_async(inner, thread_sensitive=True)
    return sync_to_async(inner, thread_sensitive=False, executor=pool)


# A connection used this recently is not checked again before its next use (where health checks
# are on: PostgreSQL's `conn_health_checks`). Django checks at the first query after every
# `close_old_connections`, i.e. at every hop to a database thread: a `SELECT 1` round trip before
# each of a turn's three writes. A connection pool's usual rule instead (HikariCP bypasses its
# alive check for a connection used in the last 500 ms): a connection that just answered is
# alive; one idle for longer is checked, and replaced if the server dropped it.
HEALTH_CHECK_BYPASS_SECONDS = 0.5

_used = threading.local()


def _stale_connections_closed(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, dropping the thread's stale connections before it (its live one is kept, and not
    checked again while it was used within HEALTH_CHECK_BYPASS_SECONDS).

    Channels' `database_sync_to_async` checks after the call too. Here a connection that failed
    in the call, or outlived CONN_MAX_AGE, is found by the next call's check, on the same
    thread, before anything uses it: the check after was a second pass over the connections at
    every hop (two a turn) that changed nothing the next call would not."""

    @functools.wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        _health_check_bypass_if_used_recently()
        try:
            return fn(*args, **kwargs)
        finally:
            _used.at = time.monotonic()

    return inner


def _health_check_bypass_if_used_recently() -> None:
    """Mark the thread's connections checked when the last call on this thread ended less than
    HEALTH_CHECK_BYPASS_SECONDS ago. A connection that failed in that call was checked (and
    closed if unusable) by `close_old_connections` just before this: Django checks a connection
    whose last use raised an error, whatever the bypass says."""
    at = getattr(_used, "at", None)
    if at is None or time.monotonic() - at >= HEALTH_CHECK_BYPASS_SECONDS:
        return
    for conn in connections.all(initialized_only=True):
        connection_health_check_skip(conn)


_lease_pool: ThreadPoolExecutor | None = None


def db_lease(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run `fn` (a lease's renewal) in the process's one lease thread, whose connection persists
    like the database threads': a busy pool of database threads must not let a live turn's lease
    run out (another process would repair the turn), and a thread of its own per renewal
    (`db_heavy`) opened a new connection each time (on PostgreSQL a new server backend, for every
    running turn, every lease/3 seconds)."""
    global _lease_pool
    with _pool_lock:
        if _lease_pool is None:
            _lease_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="palimpsest-lease")
    return sync_to_async(_stale_connections_closed(fn), thread_sensitive=False, executor=_lease_pool)


def db_heavy(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run long work (a grep over a 100 MB observation, storing or resolving a large result) in a
    thread of its own, with its own database connection, closed afterwards.

    `db` runs everything on Django's one shared thread, so a ten-second grep there would hold up
    every other session's deltas, tool calls and heartbeats in this process.
    """

    @functools.wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(inner, thread_sensitive=False)


def db_threads_close(timeout: float = 10.0) -> None:
    """Close the connections of the engine's database threads and of its lease thread, and stop
    them (the end of a test session, whose database is dropped next: a connection left open
    keeps PostgreSQL from dropping it). Each thread closes its own connections: one task per
    thread, held at a barrier until every thread has one."""
    global _pool, _lease_pool
    with _pool_lock:
        pools = [p for p in (_pool, _lease_pool) if p is not None]
        _pool = _lease_pool = None
    for pool in pools:
        workers = executor_workers(pool)
        barrier = threading.Barrier(workers, timeout=timeout)
        for future in [pool.submit(_connections_close, barrier) for _ in range(workers)]:
            future.result(timeout=timeout)
        pool.shutdown(wait=True)


def _connections_close(barrier: threading.Barrier) -> None:
    connections.close_all()
    barrier.wait()  # busy here, this thread takes no other of these tasks
