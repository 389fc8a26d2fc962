"""The sub-session tools (seed 000; schemas and returns as DESIGN.md fixes them):
`spawn_session {task, title?, copy_notepad?}`, `fork_session {task, title?}` and, in children
only, `report_result {result}`.

spawn and fork are concurrent tools: several calls in one step run their children together
(`runs.child_run` bounds how many at once, and creates each child once it has a place). Every
misuse, and every call over a bound on how many children there may be (`services`: per step, per
tree, per client, the sessions-per-minute quota), is a `ToolError` the model can read, raised
before anything is created. The fields' types and that the required ones are given are
checked against the schemas before a handler runs (`common.tool_input`; a null counts as not
given); the handlers check that a text is not blank.
"""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.subsessions import prompts, runs, selectors, services
from memory_app.subsessions.context import delegation_offered, delegation_refusal, is_child
from memory_app.subsessions.selectors import FORK_SESSION, REPORT_RESULT, SPAWN_SESSION
from sessions_app.common.db import db
from sessions_app.engine.contract import EndTurn, TextLimit, ToolContext, ToolError, ToolSpec

SPAWN_SESSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": prompts.TASK_DESCRIPTION},
        "title": {"type": "string", "description": prompts.TITLE_DESCRIPTION},
        "copy_notepad": {"type": "boolean", "description": prompts.COPY_NOTEPAD_DESCRIPTION},
    },
    "required": ["task"],
}

FORK_SESSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": prompts.FORK_TASK_DESCRIPTION},
        "title": {"type": "string", "description": prompts.TITLE_DESCRIPTION},
    },
    "required": ["task"],
}

REPORT_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "string", "description": prompts.RESULT_DESCRIPTION}},
    "required": ["result"],
}

REPORTED: dict[str, Any] = {"ok": True}

# The most characters of a child's task and of its result (`settings.subsessions.*_max_chars`);
# a title is bounded by the session's title column (`services.TITLE_MAX_CHARS`).
TEXT_SETTINGS = {"task_max_chars": 20_000, "result_max_chars": 20_000}
TEXT_SETTINGS_RULES = {"task_max_chars": ("int", 1, 400_000), "result_max_chars": ("int", 1, 400_000)}
TASK_TEXT_LIMITS = {
    "task": TextLimit(setting=("subsessions", "task_max_chars")),
    "title": TextLimit(chars=services.TITLE_MAX_CHARS, name="a session title's limit"),
}


def _task(tool: str, tool_input: dict) -> str:
    task: str = tool_input["task"]
    if not task.strip():
        raise ToolError(prompts.TASK_MISSING.format(tool=tool))
    return task


async def _delegate(ctx: ToolContext, *, mode: str, task: str, title: str | None, copy_notepad: bool) -> Any:
    if ctx.turns is None:
        raise ToolError("Sub-sessions cannot be started here: no turn loop runs this call.")
    # The step's bound is known at once (the calls are in the step's message): a call over it is
    # refused without waiting for a place.
    number = await db(selectors.subsession_call_number)(
        session_id=ctx.session.id, turn_id=ctx.turn_id, tool_use_id=ctx.tool_use_id
    )
    try:
        services.subsession_step_check(ctx.session, call_number=number)
    except services.SubsessionRefused as exc:
        raise ToolError(str(exc)) from exc

    async def create() -> uuid.UUID:
        # Once the call has a place to run its child: the tree's and the client's bounds are
        # counted then, with the children that exist.
        try:
            child = await db(services.subsession_create)(
                parent_id=ctx.session.id,
                tool_use_id=ctx.tool_use_id,
                mode=mode,
                task=task,
                title=title,
                copy_notepad=copy_notepad,
                settings_defaults=ctx.session.defaults,
            )
        except services.SubsessionRefused as exc:
            raise ToolError(str(exc)) from exc
        return child.pk

    return await runs.child_run(
        turns=ctx.turns,
        create=create,
        task=task,
        parent_turn_id=ctx.turn_id,
        # Clamped to PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT: a tree's children, and theirs, all
        # running at once in one process stall every other session's turns.
        max_concurrent=services.subsession_bound(ctx.session, "max_concurrent").value,
    )


async def spawn_session(ctx: ToolContext, tool_input: dict) -> Any:
    task = _task(SPAWN_SESSION, tool_input)
    title = tool_input.get("title")
    copy_notepad = bool(tool_input.get("copy_notepad"))
    return await _delegate(ctx, mode=services.MODE_SPAWN, task=task, title=title, copy_notepad=copy_notepad)


async def fork_session(ctx: ToolContext, tool_input: dict) -> Any:
    task = _task(FORK_SESSION, tool_input)
    title = tool_input.get("title")
    return await _delegate(ctx, mode=services.MODE_FORK, task=task, title=title, copy_notepad=True)


async def report_result(ctx: ToolContext, tool_input: dict) -> Any:
    if not is_child(ctx.session):
        raise ToolError(prompts.REPORT_NOT_A_CHILD)
    if not tool_input["result"].strip():
        raise ToolError(prompts.REPORT_MISSING)
    # The parent's call reads the result from this call's stored input (`selectors`).
    return EndTurn(REPORTED)


SPAWN_SESSION_TOOL = ToolSpec(
    name=SPAWN_SESSION,
    description=prompts.SPAWN_SESSION_DESCRIPTION,
    input_schema=SPAWN_SESSION_SCHEMA,
    handler=spawn_session,
    enabled=delegation_offered,
    refusal=delegation_refusal,
    concurrent=True,
    text_limits=TASK_TEXT_LIMITS,
)

FORK_SESSION_TOOL = ToolSpec(
    name=FORK_SESSION,
    description=prompts.FORK_SESSION_DESCRIPTION,
    input_schema=FORK_SESSION_SCHEMA,
    handler=fork_session,
    enabled=delegation_offered,
    refusal=delegation_refusal,
    concurrent=True,
    text_limits=TASK_TEXT_LIMITS,
)

REPORT_RESULT_TOOL = ToolSpec(
    name=REPORT_RESULT,
    description=prompts.REPORT_RESULT_DESCRIPTION,
    input_schema=REPORT_RESULT_SCHEMA,
    handler=report_result,
    enabled=is_child,
    refusal=lambda session: prompts.REPORT_NOT_A_CHILD,
    text_limits={"result": TextLimit(setting=("subsessions", "result_max_chars"))},
)
