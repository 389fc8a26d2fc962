"""Texts the agent sees about task scoping (seed 000: `begin_task`, `end_task`), in one place.

The seed names the tools and what they are for; it gives no wording, so these are ours.
"""

from __future__ import annotations

# The system prompt's guidance: when to scope a task.
TASKS_GUIDANCE = (
    "When a piece of work will take several tool calls (exploring, searching, trying things), wrap "
    "it in begin_task and end_task. After end_task its tool calls and results are collapsed into "
    "your summary, so put every finding you will need later in the summary (or the notepad)."
)

BEGIN_TASK_DESCRIPTION = (
    "Begin a scoped task: the tool calls you make until end_task are collapsed into your summary "
    "once it ends, keeping the context lean. One task at a time. Returns {ok: true, task_id}."
)
END_TASK_DESCRIPTION = (
    "End the open task with a summary of what it found and did: from now on its tool calls and "
    "results are replaced by the summary. Returns {ok: true, task_id, collapsed_messages}."
)

# What the model sees, where a finished task began, instead of its inner tool calls.
TASK_RECORD = (
    "Task «{name}» (finished): {summary} — its {count} inner messages are collapsed; they are kept "
    "in full in the session's history and archives (session_archive_read, once compacted)."
)

# After seed 000's pre-compaction warning, while a task is open.
TASK_OPEN_WARNING_NOTE = (
    "You have an open task: {name}. It stays open after compaction; end it with end_task when done."
)

TASK_ALREADY_OPEN = (
    "A task is already open: «{name}» (task_id {task_id}). End it with end_task before beginning "
    "another; tasks do not nest."
)
TASK_NONE_OPEN = "No task is open, so there is nothing to end. Call begin_task first to scope a task."
TASK_NAME_MISSING = 'begin_task needs "name": a short, non-empty name for the task.'
TASK_SUMMARY_MISSING = (
    'end_task needs "summary": a non-empty summary of what the task found and did (it replaces '
    "the task's tool calls in your context)."
)
