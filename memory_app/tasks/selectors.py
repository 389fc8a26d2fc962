"""Reading tasks (seed 000's task scoping)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from memory_app.tasks.models import Task, TaskStatus
from memory_app.tasks.prompts import TASK_RECORD
from sessions_app.engine.contract import HistoryView
from sessions_app.fastpath.rows import values_where


def task_open_get(*, session_id: uuid.UUID) -> Task | None:
    return Task.objects.filter(session_id=session_id, status=TaskStatus.OPEN).first()


def tasks_history_view(session_id: uuid.UUID, epoch: int, results: Collection[str]) -> HistoryView:
    """How the epoch shows the session's finished tasks: their inner calls left out, and each
    task's record as the result of its begin_task, or of its end_task when the begin_task is
    not in the epoch (a compaction happened inside the task)."""
    hidden: set[str] = set()
    replacements: dict[str, str] = {}
    # Every step's history asks this: SQL built once (`values_where`), rows not made into models.
    ended = values_where(
        Task,
        (
            "name",
            "summary",
            "collapsed_messages",
            "begin_tool_use_id",
            "end_tool_use_id",
            "hidden_tool_use_ids",
        ),
        (("session_id", "="), ("status", "=")),
        (session_id, TaskStatus.ENDED),
    )
    for name, summary, collapsed, begin_id, end_id, hidden_ids in ended:
        hidden.update(hidden_ids)
        at = begin_id if begin_id in results else end_id
        replacements[at] = TASK_RECORD.format(name=name, summary=summary, count=collapsed)
    return HistoryView(frozenset(hidden), replacements)


def tasks_tokens_saved(*, session_id: uuid.UUID, epoch: int) -> int:
    """The tokens that finished tasks keep out of the epoch's requests (the context gauge)."""
    from django.db.models import Sum

    total = Task.objects.filter(session_id=session_id, status=TaskStatus.ENDED, end_epoch=epoch).aggregate(
        total=Sum("tokens_saved")
    )["total"]
    return int(total or 0)
