"""Every query about the agent's working memory that the engine, tools, admin or dashboard need.

The session is named by id: callers (the engine acting for its own session, the admin and
dashboard for staff) have already established access to it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from memory_app.notepad.models import NotepadRevision
from sessions_app.fastpath.rows import values_get
from sessions_app.models import AgentSession


# ---------------------------------------------------------------------------
# Session notepad (seed 000)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NotepadState:
    content: str  # "" while nothing has been written (the column is null until then)
    version: int  # 0 before the first change; the n-th change makes version n
    # The revision of that moment is kept without its text (`settings.notepad.history_max_chars`):
    # `content` is "" and says nothing.
    pruned: bool = False


def notepad_get(*, session_id: uuid.UUID, for_update: bool = False) -> NotepadState:
    """The session's notepad now. `for_update` locks the session row until the surrounding
    transaction ends (for a check that must still hold when the caller then writes)."""
    if not for_update:
        # Every step's request shows it: one read by key, without the ORM's compiling.
        content, version = values_get(AgentSession, session_id, ("notepad", "notepad_version"))
        return NotepadState(content=content or "", version=version)
    row = (
        AgentSession.objects.filter(pk=session_id)
        .select_for_update()
        .values("notepad", "notepad_version")
        .get()
    )
    return NotepadState(content=row["notepad"] or "", version=row["notepad_version"])


def notepad_at_version(*, session_id: uuid.UUID, version: int) -> NotepadState:
    """The notepad as version `version` left it (version 0: empty). Raises
    `NotepadRevision.DoesNotExist` for a version whose text is not kept: never written, passed
    through by a burst of edits (one sandbox run keeps its last version only), or pruned."""
    if version == 0:
        return NotepadState(content="", version=0)
    revision = NotepadRevision.objects.only("content").get(
        session_id=session_id, version=version, pruned=False
    )
    return NotepadState(content=revision.content, version=version)


def notepad_before_version(*, session_id: uuid.UUID, version: int) -> NotepadState | None:
    """The notepad as the latest kept revision before `version` left it: empty (version 0) when
    there is none before it, None when the one before it is pruned."""
    revision = (
        NotepadRevision.objects.filter(session_id=session_id, version__lt=version)
        .order_by("-version")
        .only("content", "version", "pruned")
        .first()
    )
    if revision is None:
        return NotepadState(content="", version=0)
    return None if revision.pruned else NotepadState(content=revision.content, version=revision.version)


def notepad_as_of(*, session_id: uuid.UUID, moment: datetime) -> NotepadState:
    """The notepad as it was at `moment` (empty, version 0, before its first change)."""
    revision = (
        NotepadRevision.objects.filter(session_id=session_id, created_at__lte=moment)
        .order_by("-version")
        .only("content", "version", "pruned")
        .first()
    )
    if revision is None:
        return NotepadState(content="", version=0)
    return NotepadState(content=revision.content, version=revision.version, pruned=revision.pruned)


def notepad_revisions(*, session_id: uuid.UUID) -> list[NotepadRevision]:
    """Every kept change of the session's notepad, oldest first."""
    return list(NotepadRevision.objects.filter(session_id=session_id, pruned=False).order_by("version"))


def notepad_revisions_latest(*, session_id: uuid.UUID, limit: int) -> list[NotepadRevision]:
    """The session's `limit` latest notepad changes, newest first, without their text (a list of
    who changed it and when; `notepad_at_version` reads one)."""
    return list(
        NotepadRevision.objects.filter(session_id=session_id, pruned=False)
        .defer("content")
        .order_by("-version")[:limit]
    )


def notepad_revision_get(*, session_id: uuid.UUID, version: int) -> NotepadRevision:
    """One kept change of the notepad, with its text. Raises `NotepadRevision.DoesNotExist`."""
    return NotepadRevision.objects.get(session_id=session_id, version=version, pruned=False)


def notepad_revisions_before(
    *, session_id: uuid.UUID, before: int | None, limit: int
) -> list[NotepadRevision]:
    """Up to `limit` changes older than version `before` (all when None), newest first, without
    their text: one page of the notepad's history."""
    rows = NotepadRevision.objects.filter(session_id=session_id, pruned=False)
    if before is not None:
        rows = rows.filter(version__lt=before)
    return list(rows.defer("content").order_by("-version")[:limit])
