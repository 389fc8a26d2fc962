"""Task scoping (seed 000) through the strict fake Messages API: after end_task, requests hold
none of the task's inner calls, but its summary, the user's words from inside it, and the
notepad it wrote; the errors; a task spanning two turns; the events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.tasks.models import Task, TaskStatus
from memory_app.tasks.prompts import TASKS_GUIDANCE
from sessions_app.models import Message
from tests.fake_anthropic import Reply, text, tool_use
from tests.memory_app.notepad_support import notepad_last_section
from tests.memory_app.tasks_support import (
    MODEL,
    NO_SCRATCHPAD,
    ONLY_TASKS,
    chat,
    last_result,
    last_user_text,
    no_errors,
    request_text,
    strict_fake,
    tool_results,
    tool_uses,
)
from tests.sessions_app.conftest import echo_tool

__all__ = ["echo_tool", "strict_fake"]
pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "SECRET inner output " * 30


def survey_model(body: dict) -> Reply:
    """Turn 1 opens the task, notes a finding, runs an inner call and stops inside the task;
    turn 2 (the user's words inside the task) runs another inner call and ends the task."""
    result = last_result(body)
    if result is None:
        said = last_user_text(body)
        if said == "investigate the logs":
            return tool_use("begin_task", {"name": "log survey", "goal": "find the errors"})
        if said == "also check the tail":
            return tool_use("test_echo", {"text": "inner two " * 20})
        return text(f"answer to {said}")
    name, content = result
    if name == "begin_task":
        return tool_use("update_notepad", {"operation": "append", "content": "found: 42 errors\n"})
    if name == "update_notepad":
        return tool_use("test_echo", {"text": SECRET})
    if name == "test_echo" and "SECRET" in json.dumps(content):
        return text("half way through the survey")
    if name == "test_echo":
        return tool_use("end_task", {"summary": "The logs hold 42 errors, all in the tail."})
    return text("task finished")


async def test_after_end_task_requests_hold_the_summary_and_the_users_words_not_the_inner_calls(
    connect, model_servers, echo_tool
):
    fake = model_servers(strict=True).fake
    fake.default_reply = survey_model
    client = await connect()
    await client.create(model=model_servers.model, settings=NO_SCRATCHPAD)
    first = await chat(client, "investigate the logs")
    no_errors(first)
    # A task open at the end of a turn stays open.
    task = await sync_to_async(Task.objects.get)()
    assert task.status == TaskStatus.OPEN and task.name == "log survey"
    second = await chat(client, "also check the tail")
    no_errors(second)
    third = await chat(client, "what next?")
    no_errors(third)

    body = fake.requests[-1].body
    names = [b["name"] for b in tool_uses(body)]
    assert names == ["begin_task", "end_task"]
    assert "SECRET" not in request_text(body) and "inner two" not in request_text(body)
    record = next(b for b in tool_results(body) if b["tool_use_id"] == tool_uses(body)[0]["id"])
    assert record["content"].startswith("Task «log survey» (finished): The logs hold 42 errors")
    assert "also check the tail" in request_text(body)
    assert "half way through the survey" in request_text(body)
    # The notepad edit made inside the task is in the notepad the model reads.
    assert "found: 42 errors" in notepad_last_section(body)
    # The request right after end_task, in the same turn, is already collapsed.
    after_end = next(r.body for r in fake.requests if (last_result(r.body) or ("",))[0] == "end_task")
    assert "SECRET" not in request_text(after_end)
    # The stored messages are untouched.
    stored = await sync_to_async(lambda: [m.content for m in Message.objects.order_by("position")])()
    assert "SECRET" in json.dumps(stored)


async def test_events_announce_the_task_and_what_it_collapsed(connect, model_servers, echo_tool):
    fake = model_servers(strict=True).fake
    fake.default_reply = survey_model
    client = await connect()
    await client.create(model=model_servers.model, settings=NO_SCRATCHPAD)
    started = next(f for f in await chat(client, "investigate the logs") if f["type"] == "task.started")
    ended = next(f for f in await chat(client, "also check the tail") if f["type"] == "task.ended")
    task = await sync_to_async(Task.objects.get)()
    assert started["task_id"] == ended["task_id"] == str(task.id)
    assert started["name"] == ended["name"] == "log survey"
    assert ended["summary"] == "The logs hold 42 errors, all in the tail."
    # update_notepad and the first echo (call + result each), the second echo's call and result.
    assert ended["collapsed_messages"] == task.collapsed_messages == 6
    assert len(task.hidden_tool_use_ids) == 3


def tool_result_frames(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "tool.result"]


async def test_misuses_are_errors_the_model_reads_and_change_nothing(connect, model_servers):
    fake = model_servers(strict=True).fake
    fake.enqueue(
        tool_use("end_task", {"summary": "nothing"}),
        tool_use("begin_task", {}),
        tool_use("begin_task", {"name": "first"}),
        tool_use("begin_task", {"name": "second"}),
        tool_use("end_task", {}),
        tool_use("end_task", {"summary": "   "}),
        text("giving up"),
    )
    client = await connect()
    await client.create(model=model_servers.model, settings=ONLY_TASKS)
    frames = await chat(client, "go")
    no_errors(frames)
    results = tool_result_frames(frames)
    assert [r["is_error"] for r in results] == [True, True, False, True, True, True]
    assert results[0]["content"].startswith("No task is open")
    assert '"name"' in results[1]["content"]
    assert results[3]["content"].startswith("A task is already open: «first»")
    assert '"summary"' in results[4]["content"] and '"summary"' in results[5]["content"]
    tasks = await sync_to_async(lambda: list(Task.objects.values_list("name", "status")))()
    assert tasks == [("first", TaskStatus.OPEN)]


async def test_switched_off_the_tools_and_the_guidance_are_gone(connect, strict_fake):
    fake = strict_fake()
    client = await connect()
    await client.create(model=MODEL, settings={**ONLY_TASKS, "tasks": {"enabled": False}})
    await chat(client, "hello")
    body = fake.requests[-1].body
    assert not {"begin_task", "end_task"} & {t["name"] for t in body.get("tools", [])}
    assert TASKS_GUIDANCE not in request_text(body)


async def test_switched_on_the_tools_and_the_guidance_are_offered(connect, strict_fake):
    fake = strict_fake()
    client = await connect()
    await client.create(model=MODEL, settings=ONLY_TASKS)
    await chat(client, "hello")
    body: dict[str, Any] = fake.requests[-1].body
    assert {"begin_task", "end_task"} <= {t["name"] for t in body["tools"]}
    assert TASKS_GUIDANCE in request_text(body["system"])
