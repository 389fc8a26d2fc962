"""A child's turn, run for its parent's spawn or fork call, which waits for it.

- The child's turn is an ordinary turn (`ctx.turns.start` with the task as its user message),
  awaited with `ctx.turns.wait`: compaction, client tools, crash repair work as in any session.
- At most `subsessions.max_concurrent` children of one parent turn run at once: the others wait
  for a place (a semaphore per parent turn), they are not refused. A child is created only once
  its call has a place, and its turn begins at once: no session waits in a queue.
- A child that never began its turn is not kept (`services.subsession_discard`): its call was
  abandoned while it was being created, or its turn could not begin (a tool error says why).
- When the parent's call is abandoned (the parent's turn is cancelled or loses its lease, and
  `TurnRunner.cancellable` cancels the awaiting tool), the child's turn is cancelled in turn and
  awaited, so it ends (and cancels its own children) before the parent's turn does. The engine
  waits for every concurrent call of the step to end before the parent's turn ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from memory_app.subsessions import prompts, selectors
from memory_app.subsessions.services import subsession_discard
from sessions_app import services
from sessions_app.common.db import db
from sessions_app.engine.contract import ToolError, Turns

logger = logging.getLogger("palimpsest.subsessions")

# How long an abandoned parent call waits for its cancelled child to end. A cancelled turn stops
# at its next wait (every one of them is cancellable), so this bounds only a child stuck in its
# database writes; past it the parent goes on and the child ends on its own.
CHILD_CANCEL_WAIT_SECONDS = 60.0

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


async def _discard(child_id: uuid.UUID) -> None:
    try:
        await db(subsession_discard)(child_id=child_id)
    except Exception:
        logger.warning("sub-session %s never started and could not be deleted", child_id, exc_info=True)


async def child_run(
    *,
    turns: Turns,
    create: Callable[[], Awaitable[uuid.UUID]],
    task: str,
    parent_turn_id: uuid.UUID,
    max_concurrent: int,
) -> dict[str, Any]:
    """Once a place is free, create the child (`create`, which may raise the refusal of a
    limit), run its turn on `task`, wait for it, and return its outcome
    (`selectors.subsession_outcome`)."""
    async with child_place(parent_turn_id=parent_turn_id, limit=max_concurrent):
        _raise_if_abandoned()
        # Shielded, as the start below: a cancel meanwhile must still learn the child's id.
        creating = asyncio.ensure_future(create())
        try:
            child_id = await asyncio.shield(creating)
            _raise_if_abandoned()
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await _discard(await creating)
            raise
        start = asyncio.ensure_future(turns.start(session_id=child_id, content=task))
        try:
            turn_id = await asyncio.shield(start)
            _raise_if_abandoned()
        except asyncio.CancelledError:
            await _abandon(turns, child_id, start)
            raise
        except services.TurnInProgress:
            logger.warning("sub-session %s already runs a turn", child_id)
            return await db(selectors.subsession_outcome)(child_id=child_id, turn_id=None)
        except services.TokenRevoked as exc:
            # The tree's token was revoked: the parent's turn is being cancelled too, and the
            # child, whose turn never began, is not kept.
            await _discard(child_id)
            raise ToolError(prompts.TOKEN_REVOKED) from exc
        except Exception as exc:
            await _discard(child_id)
            raise ToolError(prompts.START_FAILED.format(reason=exc)) from exc
        try:
            await turns.wait(turn_id)
        except asyncio.CancelledError:
            await _abandon(turns, child_id, start)
            raise
    return await db(selectors.subsession_outcome)(child_id=child_id, turn_id=turn_id)


def _raise_if_abandoned() -> None:
    """Raise `CancelledError` where the call was abandoned (its task asked to cancel) even though
    no await raised it: a database hop (asgiref's `sync_to_async`) that is cancelled waits for
    its thread and then returns its result, so a cancel that comes during one is swallowed."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _abandon(turns: Turns, child_id: uuid.UUID, start: asyncio.Future) -> None:
    """The parent's call was abandoned: cancel the child's turn and wait for it to end (or, if it
    never began, discard the child)."""
    try:
        turn_id = await start
    except Exception:
        await _discard(child_id)
        return
    with contextlib.suppress(Exception):
        await turns.cancel(session_id=child_id, turn_id=turn_id, wait_seconds=CHILD_CANCEL_WAIT_SECONDS)
