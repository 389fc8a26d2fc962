"""The agent connections open in this process, by token, and the re-check of their tokens.

A revoked token's connections must close within a few seconds whichever process holds them and
whichever process revoked it (the management command runs on its own, maybe without Redis). So
nothing is announced: every PALIMPSEST_TOKEN_RECHECK_SECONDS one task per process asks the
database which of the tokens it holds connections for are still active (one query for all of
them), and closes the connections of the others with 4401. A consumer also re-checks its own
token before handling a frame when the last confirmation is older than two intervals (the
task may be late or stalled), which costs a query only then.

The same round finds connections behind the database on a session they follow (a broadcast
lost: channels_redis may drop one when another consumer of the process is cancelled as it
receives, as when a flooding client is closed) and has them catch up from the database
(`streams_check`, every PALIMPSEST_STREAM_CHECK_SECONDS), so a client never waits long on an
event it was not told of.

The registry is per process, bounded by the process's open connections (a connection leaves it
when it disconnects); it also counts the open connections of a token for the quota
(`quotas.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from sessions_app.process_tasks import task_in_loop
from sessions_app.selectors import session_last_seqs
from sessions_app.tokens import agent_token_ids_active

logger = logging.getLogger("palimpsest.ws")
# Before a frame, the token is asked about again only when the process's last round confirmed
# it longer ago than this many intervals (the round is due every interval).
FRAME_RECHECK_INTERVALS = 2
# Sessions asked about in one query by the round that finds connections behind the database.
STREAM_CHECK_BATCH = 1000


class TokenHolder(Protocol):
    """What the registry needs of a connection."""

    token_verified_at: float

    async def token_revoked(self) -> None:
        """The connection's token is revoked or gone: close with 4401."""
        ...

    def stream_seqs(self) -> dict[uuid.UUID, int]:
        """The sessions it follows, with the last seq it sent of each."""
        ...

    async def stream_behind(self, session_ids: list[uuid.UUID]) -> None:
        """The database holds newer events of these sessions than it sent: catch up."""
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


async def streams_check() -> None:
    """One round: a connection behind the database on a session it follows (its last broadcast
    lost) catches up from the database, so no client waits for ever on an event it was not told
    of. One query per STREAM_CHECK_BATCH sessions followed in the process."""
    holders = [holder for group in _by_token.values() for holder in list(group)]
    wanted: dict[uuid.UUID, list[tuple[TokenHolder, int]]] = {}
    for holder in holders:
        for session_id, sent in holder.stream_seqs().items():
            wanted.setdefault(session_id, []).append((holder, sent))
    if not wanted:
        return
    ids = list(wanted)
    stored: dict[uuid.UUID, int] = {}
    for start in range(0, len(ids), STREAM_CHECK_BATCH):
        stored.update(
            await database_sync_to_async(session_last_seqs)(
                session_ids=ids[start : start + STREAM_CHECK_BATCH]
            )
        )
    behind: dict[TokenHolder, list[uuid.UUID]] = {}
    for session_id, followers in wanted.items():
        last = stored.get(session_id, 0)
        for holder, sent in followers:
            if last > sent:
                behind.setdefault(holder, []).append(session_id)
    for holder, session_ids in behind.items():
        with contextlib.suppress(Exception):
            await holder.stream_behind(session_ids)


def _checker_ensure() -> None:
    global _checker
    _checker = task_in_loop(_checker, _check_forever, "palimpsest-token-recheck")


async def _check_forever() -> None:
    tokens_checked = time.monotonic()
    while _by_token:
        await asyncio.sleep(
            min(settings.PALIMPSEST_STREAM_CHECK_SECONDS, settings.PALIMPSEST_TOKEN_RECHECK_SECONDS)
        )
        if time.monotonic() - tokens_checked >= settings.PALIMPSEST_TOKEN_RECHECK_SECONDS:
            tokens_checked = time.monotonic()
            try:
                await tokens_recheck()
            except Exception:
                # A passing database error: the next round tries again.
                logger.warning("re-checking agent tokens failed; retrying", exc_info=True)
        try:
            await streams_check()
        except Exception:
            logger.warning("checking the connections' event streams failed; retrying", exc_info=True)
