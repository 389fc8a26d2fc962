"""Every change of a session's tasks (seed 000's task scoping).

As everywhere: the change and the `SessionEvent` announcing it are written in one transaction;
the event reaches watchers only after commit. A refused call changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from memory_app.tasks.models import Task, TaskStatus
from memory_app.tasks.prompts import (
    TASK_ALREADY_OPEN,
    TASK_NAME_MISSING,
    TASK_NONE_OPEN,
    TASK_SUMMARY_MISSING,
)
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.message_content import RESOLVED, messages_with_content
from sessions_app.models import AgentSession, Message
from sessions_app.services import event_emit

TASK_NAME_MAX_CHARS = 200
# Messages a compaction wrote (its summary, copies of the running turn's, a note summarizing the
# turn's older steps): not the task's own.
_NOT_ORIGINAL = ("compact", "carried", "turn_summary")


class TaskError(ValueError):
    """A misuse of begin_task / end_task, worded for the model; nothing changed."""


def _session_lock(session_id: uuid.UUID) -> AgentSession:
    return AgentSession.objects.select_for_update().only("id", "epoch", "next_position").get(pk=session_id)


def task_begin(*, session_id: uuid.UUID, name: str, goal: str = "", tool_use_id: str) -> Task:
    """Open a task (the call `tool_use_id`, whose assistant message is the newest stored).
    Raises `TaskError` if the name is empty or a task is already open (one at a time)."""
    name = name.strip()
    if not name:
        raise TaskError(TASK_NAME_MISSING)
    with transaction.atomic():
        session = _session_lock(session_id)
        open_task = Task.objects.filter(session_id=session_id, status=TaskStatus.OPEN).first()
        if open_task is not None:
            raise TaskError(TASK_ALREADY_OPEN.format(name=open_task.name, task_id=open_task.id))
        task = Task.objects.create(
            session_id=session_id,
            name=name[:TASK_NAME_MAX_CHARS],
            goal=goal,
            begin_epoch=session.epoch,
            begin_position=max(session.next_position - 1, 0),
            begin_tool_use_id=tool_use_id,
        )
        event_emit(
            session_id=session_id, type="task.started", payload={"task_id": str(task.id), "name": task.name}
        )
    return task


@dataclass(frozen=True)
class InnerCalls:
    # The tool_use ids of the calls made inside the task, in the order the model made them.
    hidden: list[str]
    # Stored messages holding one of them or its result (the end_task step's results, not
    # stored yet, count as one).
    messages: int
    # The tokens of their blocks in the current epoch (what the collapse keeps out of requests).
    tokens: int


def _inner_calls(task: Task, end_tool_use_id: str, epoch: int) -> InnerCalls:
    """The calls made between the task's begin_task and `end_tool_use_id`, across compactions
    (copies a compaction carried are not counted twice)."""
    rows = (
        messages_with_content(
            Message.objects.filter(session_id=task.session_id, position__gte=task.begin_position)
        )
        .order_by("position")
        .values_list(RESOLVED, "metadata", "epoch")
    )
    hidden: list[str] = []
    inside = ended = False
    originals: list[list[dict]] = []
    current: list[list[dict]] = []
    for content, metadata, message_epoch in rows.iterator():
        if message_epoch == epoch and (metadata or {}).get("type") != "compact":
            current.append(content)
        if (metadata or {}).get("type") in _NOT_ORIGINAL:
            continue
        originals.append(content)
        for block in content:
            if block.get("type") != "tool_use" or ended:
                continue
            if block.get("id") == task.begin_tool_use_id:
                inside = True
            elif block.get("id") == end_tool_use_id:
                ended = True
            elif inside:
                hidden.append(block["id"])
    ids = set(hidden)
    count = 0
    for content in originals:
        if any(b.get("id") in ids or b.get("tool_use_id") in ids for b in content):
            count += 1
    last = originals[-1] if originals else []
    if any(b.get("type") == "tool_use" and b.get("id") in ids for b in last):
        count += 1  # the end_task step's own results message, stored after this call
    tokens = sum(
        estimate_json_tokens(b)
        for content in current
        for b in content
        if b.get("id") in ids or b.get("tool_use_id") in ids
    )
    return InnerCalls(hidden, count, tokens)


def task_end(*, session_id: uuid.UUID, summary: str, tool_use_id: str) -> Task:
    """End the open task with `summary` (the call `tool_use_id`): its inner calls are collapsed
    from the next request on. Raises `TaskError` without an open task or a summary."""
    if not summary.strip():
        raise TaskError(TASK_SUMMARY_MISSING)
    with transaction.atomic():
        session = _session_lock(session_id)
        task = Task.objects.filter(session_id=session_id, status=TaskStatus.OPEN).first()
        if task is None:
            raise TaskError(TASK_NONE_OPEN)
        inner = _inner_calls(task, tool_use_id, session.epoch)
        count = inner.messages
        task.status = TaskStatus.ENDED
        task.summary = summary.strip()
        task.end_tool_use_id = tool_use_id
        task.end_epoch = session.epoch
        task.tokens_saved = inner.tokens
        task.hidden_tool_use_ids = inner.hidden
        task.collapsed_messages = count
        task.ended_at = timezone.now()
        task.save()
        event_emit(
            session_id=session_id,
            type="task.ended",
            payload={
                "task_id": str(task.id),
                "name": task.name,
                "summary": task.summary,
                "collapsed_messages": count,
            },
        )
    return task


def tasks_copy_finished(
    *,
    source_session_id: uuid.UUID,
    source_epoch: int,
    target_session_id: uuid.UUID,
    positions: dict[int, int],
) -> int:
    """Give a fork the source's tasks that finished in `source_epoch`, so that the fork's history
    shows them collapsed as the source's does (their calls' ids are the same in the copied
    messages). `positions` maps the source's message positions to the fork's. Returns how many."""
    copies = [
        Task(
            session_id=target_session_id,
            name=task.name,
            goal=task.goal,
            status=TaskStatus.ENDED,
            begin_epoch=0,
            begin_position=positions.get(task.begin_position, 0),
            begin_tool_use_id=task.begin_tool_use_id,
            end_tool_use_id=task.end_tool_use_id,
            summary=task.summary,
            collapsed_messages=task.collapsed_messages,
            end_epoch=0,
            tokens_saved=task.tokens_saved,
            hidden_tool_use_ids=task.hidden_tool_use_ids,
            started_at=task.started_at,
            ended_at=task.ended_at,
        )
        for task in Task.objects.filter(
            session_id=source_session_id, status=TaskStatus.ENDED, end_epoch=source_epoch
        )
    ]
    Task.objects.bulk_create(copies)
    return len(copies)
