"""Task scoping and compaction, through the strict fake with a window it enforces: a task open
when compaction comes is summarized like anything else and stays open in the new epoch; the
warning says so; when it ends, its record goes where the model can see it; archives hold the
collapsed messages in full and session_archive_read reads them."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from memory_app.tasks.models import Task, TaskStatus
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING
from sessions_app.models import Message
from tests.fake_anthropic import Reply, text, tool_use
from tests.memory_app.tasks_support import (
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
from tests.sessions_app.conftest import echo_tool, is_summary_call

__all__ = ["echo_tool", "strict_fake"]
pytestmark = pytest.mark.django_db(transaction=True)
FILLER = "palimpsest " * 300  # about 900 tokens
INNER_A = "inner A " * 40


def is_summary(body: dict) -> bool:
    return is_summary_call(body)


def is_warning(body: dict) -> bool:
    return any(b.get("text") == PRE_COMPACTION_WARNING for b in body["messages"][-1]["content"])


def model(body: dict) -> Reply:
    if is_summary(body):
        return text("Earlier: the survey task was begun and read inner A.")
    if is_warning(body):
        return text("Notepad is up to date.")
    result = last_result(body)
    if result is None:
        said = last_user_text(body)
        if said == "begin the survey":
            return tool_use("begin_task", {"name": "survey"})
        if said == "finish the survey":
            return tool_use("session_archive_read", {"query": "inner A"})
        return text("ok")
    name, content = result
    if name == "begin_task":
        return tool_use("test_echo", {"text": INNER_A})
    if name == "test_echo" and "inner A" in json.dumps(content):
        return text("begun")
    if name == "session_archive_read":
        return tool_use("test_echo", {"text": "inner B"})
    if name == "test_echo":
        return tool_use("end_task", {"summary": "Survey done: inner A and inner B read."})
    return text("finished")


async def test_a_task_open_through_compaction_stays_open_and_ends_in_the_new_epoch(
    connect, model_servers, echo_tool
):
    fake = model_servers(strict=True, window=6000).fake
    fake.default_reply = model
    client = await connect()
    await client.create(
        model=model_servers.model, compact_threshold=0.5, context_window=6000, settings=ONLY_TASKS
    )
    no_errors(await chat(client, "begin the survey"))
    compacted = False
    for index in range(6):
        frames = await chat(client, f"message {index}: {FILLER}")
        no_errors(frames)
        if any(f["type"] == "compaction.completed" for f in frames):
            compacted = True
            break
    assert compacted
    # The warning told the agent about its open task; the task outlived the compaction.
    warning = next(r.body for r in fake.requests if is_warning(r.body))
    notes = [b.get("text", "") for b in warning["messages"][-1]["content"]]
    assert "You have an open task: survey. It stays open after compaction" in notes[-1]
    summary_request = next(r.body for r in fake.requests if is_summary(r.body))
    assert "inner A" in request_text(summary_request)  # summarized like anything else
    task = await sync_to_async(Task.objects.get)()
    assert task.status == TaskStatus.OPEN

    frames = await chat(client, "finish the survey")
    no_errors(frames)
    read = next(f for f in frames if f["type"] == "tool.result" and f["name"] == "session_archive_read")
    assert "inner A" in json.dumps(read["content"]) and not read["is_error"]
    ended = next(f for f in frames if f["type"] == "task.ended")
    assert ended["name"] == "survey"

    body = fake.requests[-1].body
    assert [b["name"] for b in tool_uses(body)] == ["end_task"]  # begin_task was summarized
    record = tool_results(body)[0]["content"]
    assert record.startswith("Task «survey» (finished): Survey done")
    assert "inner B" not in request_text(body).replace("inner A and inner B read", "")
    # The archive (the old epoch's stored messages) holds the collapsed messages in full.
    archived = await sync_to_async(lambda: json.dumps([m.content for m in Message.objects.filter(epoch=0)]))()
    assert INNER_A.strip() in archived


async def test_a_task_begun_in_the_running_turn_is_carried_and_collapses_where_it_began(
    connect, model_servers, echo_tool
):
    fake = model_servers(strict=True, window=6000).fake
    big = "log line " * 400  # about 800 tokens

    def running(body: dict) -> Reply:
        if is_summary(body):
            return text("Earlier: filler.")
        if is_warning(body):
            return text("Notepad is up to date.")
        result = last_result(body)
        if result is None:
            if last_user_text(body) == "survey now":
                return tool_use("begin_task", {"name": "now"})
            return text("ok")
        name, content = result
        if name == "begin_task":
            return tool_use("test_echo", {"text": big})
        if name == "test_echo":
            return tool_use("end_task", {"summary": "Read the big log."})
        return text("finished")

    fake.default_reply = running
    client = await connect()
    await client.create(
        model=model_servers.model, compact_threshold=0.5, context_window=6000, settings=ONLY_TASKS
    )
    for index in range(2):
        no_errors(await chat(client, f"message {index}: {FILLER}"))
    frames = await chat(client, "survey now")
    no_errors(frames)
    assert any(f["type"] == "compaction.completed" for f in frames)
    body = fake.requests[-1].body
    assert [b["name"] for b in tool_uses(body)] == ["begin_task", "end_task"]
    begin_result = tool_results(body)[0]["content"]
    assert begin_result.startswith("Task «now» (finished): Read the big log.")
    assert "log line" not in request_text(body)
    carried = await sync_to_async(
        lambda: [m.content for m in Message.objects.filter(epoch=1, metadata__type="carried")]
    )()
    assert "begin_task" in json.dumps(carried)
