"""The observations' part of a session's export and import (docs/export.md): every stored
observation with its content (its chunks, as stored). An imported observation gets the id its
new session would have given it (`observation_id_for`), and the importer writes that id
wherever the document named the old one (tool results, masked results' placeholders)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
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


def observations_export(session_id: uuid.UUID) -> Iterator[dict[str, Any]]:
    """Each observation with its content, one at a time (the export writes each as it comes:
    a session's observations are never in memory together). Each is read by its id, with no
    cursor open between them: the export may ask for the next one from another thread."""
    ids = list(
        Observation.objects.filter(session_id=session_id)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )
    for observation_id in ids:
        row = Observation.objects.filter(pk=observation_id).first()
        if row is None:  # collected meanwhile
            continue
        item = row_export(row, FIELDS)
        chunks = ObservationChunk.objects.filter(observation_id=row.pk).order_by("index")
        item["chunks"] = [row_export(chunk, CHUNK_FIELDS) for chunk in chunks]
        yield item


def observations_ids(session_id: uuid.UUID, data: Any) -> Mapping[str, str]:
    """Each observation's id in the new session: the one its tool call's result gets there,
    or the next free attempt."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for i, item in enumerate(_items(data)):
        where = f"[{i}]"
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
    for i, item in enumerate(_items(data)):
        where = f"[{i}]"
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


def _items(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise DocumentError("", "must be a list of observations")
    return data
