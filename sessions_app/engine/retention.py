"""Retention (DESIGN.md "Operating Palimpsest"): ended sessions are deleted, with everything they
hold, `PALIMPSEST_RETENTION_DAYS` after they ended. One operation, `sessions_purge`, used by each
process's periodic sweep (`retention_sweep_if_due`, from the sweep of dead turns) and by
`manage.py palimpsest_purge`. It deletes through `sessions.session_delete`, the one delete path:
the features' delete hooks run, and message content that a fork outside the tree shares is kept.

A sub-session goes with its root: a tree is purged once its root has ended that long (ending a
root ends its whole tree), never a child of a session still in use.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app import selectors, services
from sessions_app.common.db import db
from sessions_app.engine.sessions import session_delete
from sessions_app.models import AgentSession

logger = logging.getLogger("palimpsest.engine")
# Trees deleted by one round of the periodic sweep at most; the next round takes the rest.
PURGE_BATCH = 100

_last_sweep: float | None = None


@dataclass
class Purge:
    """What a purge did (or, dry, would do): the root sessions deleted with their trees, and those
    it left (a turn still running, or gone meanwhile)."""

    deleted: list[uuid.UUID] = field(default_factory=list)
    sessions_deleted: int = 0
    skipped: list[uuid.UUID] = field(default_factory=list)


def retention_cutoff(*, days: int, now: datetime | None = None) -> datetime:
    """Sessions that ended before this are past retention."""
    return (now or timezone.now()) - timedelta(days=days)


def sessions_purge(
    *, days: int, now: datetime | None = None, dry_run: bool = False, limit: int | None = None
) -> Purge:
    """Delete every tree whose root ended more than `days` days before `now`, oldest first, each
    in a transaction of its own (one that cannot be deleted now is left for the next purge).
    `dry_run`: delete nothing, say what would go. Runs in a DB thread."""
    if days < 1:
        raise ValueError("retention is at least one day")
    cutoff = retention_cutoff(days=days, now=now)
    purge = Purge()
    after: tuple[datetime, uuid.UUID] | None = None
    while limit is None or len(purge.deleted) + len(purge.skipped) < limit:
        done = len(purge.deleted) + len(purge.skipped)
        left = PURGE_BATCH if limit is None else min(PURGE_BATCH, limit - done)
        page = selectors.sessions_past_retention(ended_before=cutoff, limit=left, after=after)
        if not page:
            break
        for session_id, ended_at in page:
            after = (ended_at, session_id)
            if dry_run:
                purge.deleted.append(session_id)
                purge.sessions_deleted += selectors.session_tree_size(session_id=session_id)
                continue
            try:
                deleted = session_delete(session_id=session_id)
            except (services.TurnInProgress, AgentSession.DoesNotExist):
                purge.skipped.append(session_id)
                continue
            purge.deleted.append(session_id)
            purge.sessions_deleted += len(deleted)
    return purge


async def retention_sweep_if_due() -> Purge | None:
    """The periodic sweep's purge: at most every `PALIMPSEST_RETENTION_SWEEP_SECONDS` in a
    process, and only when `PALIMPSEST_RETENTION_DAYS` is set. None when it did not run."""
    global _last_sweep
    days = settings.PALIMPSEST_RETENTION_DAYS
    if not days:
        return None
    now = time.monotonic()
    if _last_sweep is not None and now - _last_sweep < settings.PALIMPSEST_RETENTION_SWEEP_SECONDS:
        return None
    _last_sweep = now
    purge = await db(sessions_purge)(days=days, limit=PURGE_BATCH)
    if purge.deleted:
        logger.info(
            "retention: deleted %d ended session tree(s) (%d sessions) older than %d days",
            len(purge.deleted),
            purge.sessions_deleted,
            days,
        )
    return purge


def retention_sweep_forget() -> None:
    """Forget when this process last purged (tests)."""
    global _last_sweep
    _last_sweep = None
