"""The tasks' part of a session's export and import (docs/export.md): every task, open or ended
(an ended task's collapse is how later requests show its calls)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from memory_app.tasks.models import Task, TaskStatus
from sessions_app.transfer_rows import DocumentError, list_at, row_export, row_import

FIELDS = (
    "id",
    "name",
    "goal",
    "status",
    "begin_epoch",
    "begin_position",
    "begin_tool_use_id",
    "end_tool_use_id",
    "summary",
    "collapsed_messages",
    "end_epoch",
    "tokens_saved",
    "hidden_tool_use_ids",
    "started_at",
    "ended_at",
)


def tasks_export(session_id: uuid.UUID) -> dict[str, Any]:
    rows = Task.objects.filter(session_id=session_id).order_by("started_at", "id")
    return {"tasks": [row_export(row, FIELDS) for row in rows.iterator(chunk_size=200)]}


def tasks_ids(session_id: uuid.UUID, data: Any) -> Mapping[str, str]:
    """A new id for each task (task ids are unique across sessions)."""
    ids = {}
    for i, item in enumerate(list_at(data, "tasks", "")):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise DocumentError(f"tasks[{i}].id", "must be a UUID")
        ids[item["id"]] = str(uuid.uuid4())
    return ids


def tasks_import(session_id: uuid.UUID, data: Any) -> None:
    rows = [
        row_import(Task, item, fields=FIELDS, where=f"tasks[{i}]", fixed={"session_id": session_id})
        for i, item in enumerate(list_at(data, "tasks", ""))
    ]
    for i, row in enumerate(rows):
        hidden = row.hidden_tool_use_ids
        if not isinstance(hidden, list) or not all(isinstance(h, str) for h in hidden):
            raise DocumentError(f"tasks[{i}].hidden_tool_use_ids", "must be a list of strings")
    if sum(1 for row in rows if row.status == TaskStatus.OPEN) > 1:
        raise DocumentError("tasks", "at most one task may be open")
    Task.objects.bulk_create(rows, batch_size=200)
