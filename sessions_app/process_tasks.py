"""A process's background tasks (the token re-check, the sweep of dead turns, the poll of waiting
turns): one of each per event loop, started when first needed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


def task_in_loop(
    task: asyncio.Task | None, start: Callable[[], Coroutine[Any, Any, None]], name: str
) -> asyncio.Task:
    """`task` if it still runs in the running event loop, else `start()` as a new task there (a
    task ends when it has nothing left to do; tests run each in an event loop of its own)."""
    loop = asyncio.get_running_loop()
    if task is not None and not task.done() and task.get_loop() is loop:
        return task
    return loop.create_task(start(), name=name)
