"""Running the ORM from the engine: long work does not hold up the shared database thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sessions_app.engine.db import db, db_heavy
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
    from sessions_app import services

    session = await db(services.session_create)(owner=None)
    assert await db_heavy(lambda: AgentSession.objects.get(pk=session.id).model)() == session.model
