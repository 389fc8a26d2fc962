"""Task scoping's tools (seed 000; schemas and returns fixed in DESIGN.md): `begin_task {name,
goal?}` → `{ok, task_id}` and `end_task {summary}` → `{ok, task_id, collapsed_messages}`. Every
misuse is a `ToolError` the model can read; nothing changes on error."""

from __future__ import annotations

from typing import Any

from memory_app.tasks import services
from memory_app.tasks.context import tasks_enabled
from memory_app.tasks.prompts import (
    BEGIN_TASK_DESCRIPTION,
    END_TASK_DESCRIPTION,
    TASK_NAME_MISSING,
    TASK_SUMMARY_MISSING,
)
from sessions_app.common.db import db
from sessions_app.engine.contract import TextLimit, ToolContext, ToolError, ToolSpec

BEGIN_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "A short name for the task"},
        "goal": {"type": "string", "description": "What the task should find out or achieve"},
    },
    "required": ["name"],
}

END_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {
            "type": "string",
            "description": "What the task found and did: it replaces the task's tool calls in your context",
        }
    },
    "required": ["summary"],
}


# The most characters of each text (`settings.tasks.*_max_chars`): a task's summary stays in every
# later request in place of its tool calls, so it must stay short.
TEXT_SETTINGS = {"name_max_chars": 200, "goal_max_chars": 4_000, "summary_max_chars": 8_000}
TEXT_SETTINGS_RULES = {
    "name_max_chars": ("int", 1, 10_000),
    "goal_max_chars": ("int", 1, 100_000),
    "summary_max_chars": ("int", 1, 200_000),
}


def _text(tool_input: dict, name: str, missing: str) -> str:
    """A required text field that must not be blank (its type and presence are checked against
    the schema before the handler runs)."""
    value: str = tool_input[name]
    if not value.strip():
        raise ToolError(missing)
    return value


async def begin_task(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    name = _text(tool_input, "name", TASK_NAME_MISSING)
    goal = tool_input.get("goal") or ""
    try:
        task = await db(services.task_begin)(
            session_id=ctx.session.id, name=name, goal=goal, tool_use_id=ctx.tool_use_id
        )
    except services.TaskError as exc:
        raise ToolError(str(exc)) from exc
    return {"ok": True, "task_id": str(task.id)}


async def end_task(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    summary = _text(tool_input, "summary", TASK_SUMMARY_MISSING)
    try:
        task = await db(services.task_end)(
            session_id=ctx.session.id, summary=summary, tool_use_id=ctx.tool_use_id
        )
    except services.TaskError as exc:
        raise ToolError(str(exc)) from exc
    return {"ok": True, "task_id": str(task.id), "collapsed_messages": task.collapsed_messages}


BEGIN_TASK = ToolSpec(
    name="begin_task",
    description=BEGIN_TASK_DESCRIPTION,
    input_schema=BEGIN_TASK_SCHEMA,
    handler=begin_task,
    enabled=tasks_enabled,
    text_limits={
        "name": TextLimit(setting=("tasks", "name_max_chars")),
        "goal": TextLimit(setting=("tasks", "goal_max_chars")),
    },
)

END_TASK = ToolSpec(
    name="end_task",
    description=END_TASK_DESCRIPTION,
    input_schema=END_TASK_SCHEMA,
    handler=end_task,
    enabled=tasks_enabled,
    refreshes_history=True,
    text_limits={"summary": TextLimit(setting=("tasks", "summary_max_chars"))},
)
