"""The notepad as the dashboard shows it, composed from the notepad's own selectors."""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.notepad import selectors as notepad_selectors

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
