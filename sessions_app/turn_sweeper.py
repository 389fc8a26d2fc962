"""Closing the turns whose process died, so that their clients hear how they ended.

A turn holds its session's lease and renews it (a third of `PALIMPSEST_TURN_LEASE_SECONDS`
apart); when its process dies (a crash, a SIGKILL, a restart), the lease runs out and nothing
would ever announce the turn's end: a client that reconnected would wait for a `turn.completed`
that never comes. So each process that holds agent connections checks, once a lease period,
for leases that ran out over a lease period ago (a live turn would have renewed its lease
three times by then, so a few failed heartbeats never end a live turn) and closes those turns
(`services.turn_expired_close`: `error` `turn_interrupted`, then `turn.completed` with
`stop_reason: "error"`). The session's next turn repairs the history as before. Several
processes may sweep at once: the row lock lets one close each turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from channels.db import database_sync_to_async
from django.conf import settings

from sessions_app import services

logger = logging.getLogger("palimpsest.engine")
# Expired leases closed in one round at most (the rest wait for the next round).
SWEEP_BATCH_SESSIONS = 100

_sweeper: asyncio.Task | None = None


def sweep_interval() -> float:
    """The pause between rounds, and how long past its expiry a lease is left alone."""
    return max(float(settings.PALIMPSEST_TURN_LEASE_SECONDS), 0.05)


async def turns_expired_sweep() -> int:
    """One round: close the turns whose lease ran out over a lease period ago; returns how
    many were closed."""
    closed = 0
    grace = sweep_interval()
    for session_id in await database_sync_to_async(services.sessions_with_expired_lease)(
        grace_seconds=grace, limit=SWEEP_BATCH_SESSIONS
    ):
        if await database_sync_to_async(services.turn_expired_close)(
            session_id=session_id, grace_seconds=grace
        ):
            logger.info("closed the interrupted turn of session %s (its lease ran out)", session_id)
            closed += 1
    return closed


def sweeper_ensure(*, while_needed: Callable[[], bool]) -> None:
    """Sweep in the background of this process's event loop for as long as
    `while_needed()` holds (the process has agent connections)."""
    global _sweeper
    loop = asyncio.get_running_loop()
    if _sweeper is not None and not _sweeper.done() and _sweeper.get_loop() is loop:
        return
    _sweeper = loop.create_task(_sweep_forever(while_needed), name="palimpsest-turn-sweep")


async def _sweep_forever(while_needed: Callable[[], bool]) -> None:
    while while_needed():
        await asyncio.sleep(sweep_interval())
        try:
            await turns_expired_sweep()
        except Exception:
            # A passing database error: the next round tries again.
            logger.warning("closing interrupted turns failed; retrying", exc_info=True)
