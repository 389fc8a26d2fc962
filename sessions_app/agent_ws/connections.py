"""The agent connections open in this process, by token, and the re-check of their tokens.

A revoked token's connections must close within a few seconds whichever process holds them and
whichever process revoked it (the management command runs on its own, maybe without Redis). So
nothing is announced: every PALIMPSEST_TOKEN_RECHECK_SECONDS one task per process asks the
database which of the tokens it holds connections for are still active (one query for all of
them), and closes the connections of the others with 4401. A consumer also re-checks its own
token before handling a frame when the last confirmation is older than two intervals (the
task may be late or stalled), which costs a query only then.

The registry is per process, bounded by the process's open connections (a connection leaves it
when it disconnects); it also counts the open connections of a token for the quota
(`quotas.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from sessions_app.process_tasks import task_in_loop
from sessions_app.tokens import agent_token_ids_active

logger = logging.getLogger("palimpsest.ws")
# Before a frame, the token is asked about again only when the process's last round confirmed
# it longer ago than this many intervals (the round is due every interval).
FRAME_RECHECK_INTERVALS = 2


class TokenHolder(Protocol):
    """What the registry needs of a connection."""

    token_verified_at: float

    async def token_revoked(self) -> None:
        """The connection's token is revoked or gone: close with 4401."""
        ...


# Weak: a connection object that is gone (whatever happened to its disconnect) leaves by itself.
_by_token: dict[int, weakref.WeakSet[TokenHolder]] = {}
_checker: asyncio.Task | None = None


def connection_add(holder: TokenHolder, *, token_id: int) -> int:
    """Register an open connection of `token_id`; returns how many this process now holds."""
    holders = _by_token.setdefault(token_id, weakref.WeakSet())
    holders.add(holder)
    holder.token_verified_at = time.monotonic()
    _checker_ensure()
    return len(holders)


def connection_remove(holder: TokenHolder, *, token_id: int) -> None:
    holders = _by_token.get(token_id)
    if holders is None:
        return
    holders.discard(holder)
    if not holders:
        del _by_token[token_id]


def connections_open(*, token_id: int) -> int:
    return len(_by_token.get(token_id, ()))


async def token_still_active(holder: TokenHolder, *, token_id: int) -> bool:
    """Before a frame: True if the token was confirmed lately (FRAME_RECHECK_INTERVALS), else
    ask the database now (and close the connection if it is not active)."""
    stale_after = FRAME_RECHECK_INTERVALS * settings.PALIMPSEST_TOKEN_RECHECK_SECONDS
    if time.monotonic() - holder.token_verified_at <= stale_after:
        return True
    active = await database_sync_to_async(agent_token_ids_active)(token_ids=[token_id])
    if token_id in active:
        holder.token_verified_at = time.monotonic()
        return True
    await holder.token_revoked()
    return False


async def tokens_recheck() -> None:
    """One round: close every connection whose token is no longer active."""
    for token_id in [t for t, holders in _by_token.items() if not holders]:
        del _by_token[token_id]
    held = list(_by_token)
    if not held:
        return
    checked_at = time.monotonic()
    active = await database_sync_to_async(agent_token_ids_active)(token_ids=held)
    for token_id in held:
        holders = list(_by_token.get(token_id, ()))
        if token_id in active:
            for holder in holders:
                holder.token_verified_at = max(holder.token_verified_at, checked_at)
            continue
        if holders:
            logger.info("token %s is revoked: closing its %d connection(s)", token_id, len(holders))
        for holder in holders:
            with contextlib.suppress(Exception):
                await holder.token_revoked()


def _checker_ensure() -> None:
    global _checker
    _checker = task_in_loop(_checker, _check_forever, "palimpsest-token-recheck")


async def _check_forever() -> None:
    while _by_token:
        await asyncio.sleep(settings.PALIMPSEST_TOKEN_RECHECK_SECONDS)
        try:
            await tokens_recheck()
        except Exception:
            # A passing database error: the next round tries again.
            logger.warning("re-checking agent tokens failed; retrying", exc_info=True)
