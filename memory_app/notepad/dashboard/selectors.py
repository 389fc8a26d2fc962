"""The notepad as the dashboard shows it, composed from the notepad's own selectors: its panel
(the text now and its latest changes), its history page and the notepad as an archive found it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad.models import NotepadRevision
from sessions_app.dashboard.selectors import (
    HISTORY_PAGE_SIZE,
    Against,
    HistoryEntry,
    MemoryHistory,
    NotFound,
    history_version_choose,
    memory_history_make,
)

NOTEPAD = "notepad"  # the memory's name among the histories
NOTEPAD_REVISIONS_SHOWN = 30


def notepad_panel(*, session_id: uuid.UUID) -> dict[str, Any]:
    """The notepad panel's context (the page, its partials and the live fragments all render it
    from this): `notepad`, the notepad now, and `notepad_revisions`, its latest changes."""
    return {
        "notepad": notepad_selectors.notepad_get(session_id=session_id),
        "notepad_revisions": notepad_selectors.notepad_revisions_latest(
            session_id=session_id, limit=NOTEPAD_REVISIONS_SHOWN
        ),
    }


def notepad_history(
    *,
    session_id: uuid.UUID,
    version: int | None = None,
    at: datetime | None = None,
    against: Against = "previous",
    before: int | None = None,
    limit: int = HISTORY_PAGE_SIZE,
) -> MemoryHistory:
    """The notepad's history with change `version` selected (or the one current at `at`, or the
    latest). Raises `NotFound` for a version that was never written."""
    now = notepad_selectors.notepad_get(session_id=session_id)
    as_of = notepad_selectors.notepad_as_of(session_id=session_id, moment=at).version if at else None
    chosen = history_version_choose(version=version, current=now.version, as_of=as_of)
    rows = notepad_selectors.notepad_revisions_before(session_id=session_id, before=before, limit=limit + 1)
    selected: HistoryEntry | None = None
    text = previous = ""
    previous_version: int | None = None
    if chosen > 0:
        try:
            revision = notepad_selectors.notepad_revision_get(session_id=session_id, version=chosen)
        except NotepadRevision.DoesNotExist:
            raise NotFound from None
        if against == "previous":
            # The change before it: versions a sandbox run passed through keep no text, so it
            # is the latest kept one (none kept: compared with empty).
            before_it = notepad_selectors.notepad_before_version(session_id=session_id, version=chosen)
            if before_it is not None:
                previous, previous_version = before_it.content, before_it.version
        selected = HistoryEntry(revision.version, revision.author, revision.operation, revision.created_at)
        text = revision.content
    return memory_history_make(
        memory=NOTEPAD,
        current_version=now.version,
        current_text=now.content,
        rows=[HistoryEntry(r.version, r.author, r.operation, r.created_at) for r in rows],
        limit=limit,
        selected=selected,
        selected_version=chosen,
        text=text,
        against=against,
        previous_text=previous,
        previous_version=previous_version,
    )


def notepad_then(session_id: uuid.UUID, moment: datetime) -> dict[str, Any]:
    """The archive stepper's notepad: `notepad_then`, as it was at `moment` (an archive's)."""
    return {"notepad_then": notepad_selectors.notepad_as_of(session_id=session_id, moment=moment)}
