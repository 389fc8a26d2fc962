"""Running the synchronous ORM from the async engine."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections

P = ParamSpec("P")
R = TypeVar("R")


def db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run `fn` in Django's sync thread, dropping stale connections around it (as Channels'
    `database_sync_to_async` does, without importing Channels into the engine)."""

    @functools.wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(inner, thread_sensitive=True)


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
