"""Task scoping's place in each model request (seed 000): its setting, its guidance line, the
collapse of finished tasks (`selectors.tasks_history_view`) and the note after the
pre-compaction warning while a task is open. Called in a DB thread."""

from __future__ import annotations

from memory_app.tasks import selectors
from memory_app.tasks.prompts import TASK_OPEN_WARNING_NOTE, TASKS_GUIDANCE
from sessions_app.engine.contract import SessionSnapshot


def tasks_enabled(session: SessionSnapshot) -> bool:
    return bool(session.setting("tasks", "enabled"))


class TasksSection:
    """The guidance on when to scope a task, in the stable system prompt."""

    name = "tasks"

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return [TASKS_GUIDANCE] if tasks_enabled(session) else []

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        return None

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return []


TASKS_SECTION = TasksSection()


def tasks_warning_notes(session: SessionSnapshot) -> list[str]:
    """After the pre-compaction warning: the open task, which outlives the compaction."""
    task = selectors.task_open_get(session_id=session.id)
    return [TASK_OPEN_WARNING_NOTE.format(name=task.name)] if task is not None else []
