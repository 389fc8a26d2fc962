"""The scripted model scopes a task: `task NAME: WORK` calls begin_task, notes WORK with
update_notepad (when the notepad is on), ends the task with a summary, and reports it; the next
request, as recorded and verified, shows the task's record instead of its inner call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.tasks.models import Task
from memory_app.tasks.scripted import TASKS_OFF_REPLY
from sessions_app import selectors
from sessions_app.models import ModelCall
from tests.memory_app.notepad_support import notepad_last_section

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_scratchpad")]


async def turn(client: Any, content: str) -> list[dict]:
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed", timeout=15)


def answers(frames: list[dict]) -> list[str]:
    return [
        b["text"]
        for f in frames
        if f["type"] == "assistant.message"
        for b in f["content"]
        if b["type"] == "text"
    ]


async def test_task_scopes_notes_and_ends_with_a_summary(connect: Any) -> None:
    client = await connect()
    await client.create()
    frames = await turn(client, "task log survey: 42 errors in the tail")
    calls = [(f["name"], f["input"]) for f in frames if f["type"] == "tool.call"]
    assert calls == [
        ("begin_task", {"name": "log survey", "goal": "42 errors in the tail"}),
        ("update_notepad", {"operation": "append", "content": "- log survey: 42 errors in the tail\n"}),
        ("end_task", {"summary": "log survey: 42 errors in the tail (done)"}),
    ]
    assert answers(frames)[-1] == "Task done; 2 messages of it are collapsed."
    assert [f["type"] for f in frames].count("task.ended") == 1

    await turn(client, "echo next")
    call = await sync_to_async(lambda: ModelCall.objects.order_by("-started_at").first())()
    assert call is not None
    request = await sync_to_async(selectors.model_call_request)(call=call)
    assert await sync_to_async(selectors.model_call_request_verified)(call=call)
    names = [b["name"] for m in request["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    assert names == ["begin_task", "end_task"]
    assert "Task «log survey» (finished)" in json.dumps(request, ensure_ascii=False)
    assert "- log survey: 42 errors in the tail" in notepad_last_section(request)


async def test_without_the_notepad_the_task_ends_at_once(connect: Any) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"enabled": False}})
    frames = await turn(client, "task quick: nothing to note")
    assert [f["name"] for f in frames if f["type"] == "tool.call"] == ["begin_task", "end_task"]
    task = await sync_to_async(Task.objects.get)()
    assert task.collapsed_messages == 0


async def test_switched_off_the_scripted_model_says_so(connect: Any) -> None:
    client = await connect()
    await client.create(settings={"tasks": {"enabled": False}})
    frames = await turn(client, "task quick: nothing")
    assert answers(frames) == [TASKS_OFF_REPLY]
