"""A child's turn, run for its parent's spawn or fork call, which waits for it.

- The child's turn is an ordinary turn (`ctx.turns.start` with the task as its user message),
  awaited with `ctx.turns.wait`: compaction, client tools, crash repair work as in any session.
- At most `subsessions.max_concurrent` children of one parent turn run at once: the others wait
  for a place (a semaphore per parent turn), they are not refused.
- When the parent's call is abandoned (the parent's turn is cancelled or loses its lease, and
  `TurnRunner.cancellable` cancels the awaiting tool), the child's turn is cancelled in turn and
  awaited briefly, so it ends (and cancels its own children) before the parent's turn does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from memory_app.subsessions import selectors
from sessions_app import services
from sessions_app.common.db import db
from sessions_app.engine.contract import Turns

logger = logging.getLogger("palimpsest.subsessions")

# How long an abandoned parent call waits for its cancelled child to end.
CHILD_CANCEL_WAIT_SECONDS = 10.0

# Parent turn id → [its semaphore, how many of its calls hold or wait for it].
_places: dict[uuid.UUID, list[Any]] = {}


@contextlib.asynccontextmanager
async def child_place(*, parent_turn_id: uuid.UUID, limit: int) -> AsyncIterator[None]:
    """Hold one of the parent turn's `limit` places for running children (waiting for one)."""
    entry = _places.setdefault(parent_turn_id, [asyncio.Semaphore(limit), 0])
    entry[1] += 1
    try:
        async with entry[0]:
            yield
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            _places.pop(parent_turn_id, None)


async def child_run(
    *, turns: Turns, child_id: uuid.UUID, task: str, parent_turn_id: uuid.UUID, max_concurrent: int
) -> dict[str, Any]:
    """Run the child's turn on `task` once a place is free, wait for it, and return its outcome
    (`selectors.subsession_outcome`). A child that cannot begin its turn has `failed`."""
    async with child_place(parent_turn_id=parent_turn_id, limit=max_concurrent):
        # Shielded: a cancel while the turn is being begun must still learn its id, to cancel it.
        start = asyncio.ensure_future(turns.start(session_id=child_id, content=task))
        try:
            turn_id = await asyncio.shield(start)
            await turns.wait(turn_id)
        except services.TurnInProgress:
            logger.warning("sub-session %s already runs a turn", child_id)
            return await db(selectors.subsession_outcome)(child_id=child_id, turn_id=None)
        except services.TokenRevoked:
            # The tree's token was revoked: the parent's turn is being cancelled too.
            return await db(selectors.subsession_outcome)(child_id=child_id, turn_id=None)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await turns.cancel(
                    session_id=child_id, turn_id=await start, wait_seconds=CHILD_CANCEL_WAIT_SECONDS
                )
            raise
    return await db(selectors.subsession_outcome)(child_id=child_id, turn_id=turn_id)
