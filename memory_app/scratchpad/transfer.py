"""The scratchpad's part of a session's export and import (docs/export.md): its spaces as they
are now and every revision."""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.scratchpad.models import Scratchpad, ScratchpadRevision
from sessions_app.transfer_rows import DocumentError, list_at, row_export, row_import

PAD_FIELDS = (
    "notes",
    "plan",
    "refs",
    "notes_version",
    "plan_version",
    "refs_version",
    "changed_at_turn",
    "created_at",
)
REVISION_FIELDS = ("space", "version", "value", "author", "action", "created_at")


def scratchpad_export(session_id: uuid.UUID) -> dict[str, Any]:
    pad = Scratchpad.objects.filter(session_id=session_id).first()
    revisions = ScratchpadRevision.objects.filter(session_id=session_id).order_by("space", "version")
    return {
        "pad": row_export(pad, PAD_FIELDS) if pad is not None else None,
        "revisions": [row_export(row, REVISION_FIELDS) for row in revisions.iterator(chunk_size=200)],
    }


def scratchpad_import(session_id: uuid.UUID, data: Any) -> None:
    revisions = list_at(data, "revisions", "")
    if "pad" not in data:
        raise DocumentError("pad", "is missing")
    if data["pad"] is not None:
        pad = row_import(
            Scratchpad, data["pad"], fields=PAD_FIELDS, where="pad", fixed={"session_id": session_id}
        )
        refs = pad.refs
        if not isinstance(refs, list) or not all(isinstance(ref, str) for ref in refs):
            raise DocumentError("pad.refs", "must be a list of strings")
        pad.save(force_insert=True)
    rows = [
        row_import(
            ScratchpadRevision,
            item,
            fields=REVISION_FIELDS,
            where=f"revisions[{i}]",
            fixed={"session_id": session_id},
        )
        for i, item in enumerate(revisions)
    ]
    if len({(row.space, row.version) for row in rows}) != len(rows):
        raise ValueError("revisions: two revisions of one space have the same version")
    ScratchpadRevision.objects.bulk_create(rows, batch_size=200)
