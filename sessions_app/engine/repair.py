"""Each process's sweep for turns whose process died.

A turn's lease is renewed every third of `PALIMPSEST_TURN_LEASE_SECONDS` while its process
lives. When a process dies (kill -9, a lost machine) its turns' leases run out, and any live
process repairs them (`runner.turn_repair_if_dead`): a turn waiting for a client's tool results
is taken over and goes on; any other is ended with `turn.completed` (`stop_reason: "error"`) and
an `error` event `server_stopped`. The consumers repair a session's turn when a client attaches
or sends it a frame; this sweep finds the others (one query on the lease expiry index every
`PALIMPSEST_TURN_SWEEP_SECONDS`), so a dead turn is finished even when no client comes back.
A lease records its holder's host and pid: a turn whose holder was a process of this host that
is gone is repaired by the next round without waiting for its lease to run out.

The same round purges the sessions past retention when it is on and due (`engine.retention`).

The sweep is started by the first connection a process serves (`sweeper_ensure`): daphne has no
startup hook, and a process that serves nobody has nobody to tell.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from django.conf import settings

from sessions_app import selectors
from sessions_app.common.db import db
from sessions_app.common.processes import process_gone, process_host
from sessions_app.engine.retention import retention_sweep_if_due
from sessions_app.engine.runner import turn_repair_if_dead
from sessions_app.process_tasks import task_in_loop

logger = logging.getLogger("palimpsest.engine")
# Sessions repaired by one round at most; the next round takes the rest.
SWEEP_BATCH = 100

_sweeper: asyncio.Task | None = None


def _sessions_of_gone_processes(*, limit: int) -> list[uuid.UUID]:
    """Sessions whose lease's holder was a process of this host that is gone (runs on a database
    thread: one query for the pids, each pid looked at once, one for their sessions)."""
    host = process_host()
    gone = {pid for pid in selectors.lease_pids_on_host(host=host) if process_gone(host=host, pid=pid)}
    return selectors.sessions_leased_by(host=host, pids=gone, limit=limit) if gone else []


async def turns_sweep() -> int:
    """One round: repair every session whose turn's lease ran out, or whose lease's holder was a
    process of this host that is gone; how many were repaired."""
    repaired = 0
    expired = await db(selectors.sessions_lease_expired)(limit=SWEEP_BATCH)
    orphaned = await db(_sessions_of_gone_processes)(limit=SWEEP_BATCH)
    for session_id in dict.fromkeys([*expired, *orphaned]):
        try:
            if await turn_repair_if_dead(session_id=session_id):
                repaired += 1
        except Exception:
            logger.exception("repairing the turn of session %s failed; trying again next round", session_id)
    return repaired


def sweeper_ensure() -> None:
    """Start this process's sweep in the running event loop, unless it runs already."""
    global _sweeper
    _sweeper = task_in_loop(_sweeper, _sweep_forever, "palimpsest-turn-sweep")


async def sweeper_stop() -> None:
    """Stop this process's sweep (tests: no task outlives its event loop)."""
    global _sweeper
    task, _sweeper = _sweeper, None
    if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _sweep_forever() -> None:
    while True:
        await asyncio.sleep(settings.PALIMPSEST_TURN_SWEEP_SECONDS)
        try:
            await turns_sweep()
        except Exception:
            # A passing database error: the next round tries again.
            logger.warning("sweeping for dead turns failed; retrying", exc_info=True)
        try:
            await retention_sweep_if_due()
        except Exception:
            logger.warning("purging sessions past retention failed; retrying", exc_info=True)
