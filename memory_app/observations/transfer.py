"""The observations' part of a session's export and import (docs/export.md): every stored
observation with its content (its chunks, as stored). An imported observation gets the id its
new session would have given it (`observation_id_for`), and the importer writes that id
wherever the document named the old one (tool results, masked results' placeholders)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from memory_app.observations.models import Observation, ObservationChunk
from memory_app.observations.services import observation_id_for
from sessions_app.transfer_rows import DocumentError, list_at, row_export, row_import

FIELDS = (
    "id",
    "turn_id",
    "step",
    "tool_name",
    "tool_use_id",
    "kind",
    "content_is_json",
    "size_bytes",
    "char_count",
    "line_count",
    "sha256",
    "chunk_size",
    "summary",
    "metadata",
    "created_at",
    "expires_at",
    "session_scope",
)
CHUNK_FIELDS = ("index", "text", "data", "start_char", "start_byte", "start_line", "end_line")
ID_ATTEMPTS = 100


def observations_export(session_id: uuid.UUID) -> dict[str, Any]:
    items = []
    for row in (
        Observation.objects.filter(session_id=session_id).order_by("created_at", "id").iterator(chunk_size=50)
    ):
        item = row_export(row, FIELDS)
        chunks = ObservationChunk.objects.filter(observation_id=row.pk).order_by("index")
        item["chunks"] = [row_export(chunk, CHUNK_FIELDS) for chunk in chunks.iterator(chunk_size=32)]
        items.append(item)
    return {"observations": items}


def observations_ids(session_id: uuid.UUID, data: Any) -> Mapping[str, str]:
    """Each observation's id in the new session: the one its tool call's result gets there,
    or the next free attempt."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for i, item in enumerate(list_at(data, "observations", "")):
        where = f"observations[{i}]"
        if not isinstance(item, dict):
            raise DocumentError(where, "must be an object")
        old, tool_use_id = item.get("id"), item.get("tool_use_id")
        if not isinstance(old, str) or not old:
            raise DocumentError(f"{where}.id", "must be a non-empty string")
        if not isinstance(tool_use_id, str):
            raise DocumentError(f"{where}.tool_use_id", "must be a string")
        for attempt in range(ID_ATTEMPTS):
            candidate = observation_id_for(session_id=session_id, tool_use_id=tool_use_id, attempt=attempt)
            if candidate not in taken and not Observation.objects.filter(pk=candidate).exists():
                break
        else:
            raise DocumentError(f"{where}.id", "no free id for this observation")
        taken.add(candidate)
        ids[old] = candidate
    return ids


def observations_import(session_id: uuid.UUID, data: Any) -> None:
    for i, item in enumerate(list_at(data, "observations", "")):
        where = f"observations[{i}]"
        row = row_import(Observation, item, fields=FIELDS, where=where, fixed={"session_id": session_id})
        chunks = [
            row_import(
                ObservationChunk,
                chunk,
                fields=CHUNK_FIELDS,
                where=f"{where}.chunks[{j}]",
                fixed={"observation": row},
            )
            for j, chunk in enumerate(list_at(item, "chunks", where))
        ]
        row.save(force_insert=True)
        ObservationChunk.objects.bulk_create(chunks, batch_size=32)
