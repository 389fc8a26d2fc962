"""The notepad's part of a session's export and import (docs/export.md): its revisions. The
notepad's text and version live on the session's row, which core carries."""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.notepad.models import NotepadRevision
from sessions_app.transfer_rows import list_at, row_export, row_import

FIELDS = ("version", "author", "operation", "content", "chars", "pruned", "created_at")


def notepad_export(session_id: uuid.UUID) -> dict[str, Any]:
    rows = NotepadRevision.objects.filter(session_id=session_id).order_by("version")
    return {"revisions": [row_export(row, FIELDS) for row in rows.iterator(chunk_size=200)]}


def notepad_import(session_id: uuid.UUID, data: Any) -> None:
    revisions = list_at(data, "revisions", "")
    rows = [
        row_import(
            NotepadRevision, item, fields=FIELDS, where=f"revisions[{i}]", fixed={"session_id": session_id}
        )
        for i, item in enumerate(revisions)
    ]
    if len({row.version for row in rows}) != len(rows):
        raise ValueError("revisions: two revisions have the same version")
    NotepadRevision.objects.bulk_create(rows, batch_size=200)
