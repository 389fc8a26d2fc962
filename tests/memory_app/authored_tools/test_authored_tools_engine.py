"""Authored tools through the engine with the scripted model and the real jail: defined in one
session of an agent, used from a new one; the input checked before the sandbox starts; progress
notes as separate events naming the call; the result carried apart from stdout."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad import services as notepad_services
from sessions_app.models import AgentSession
from tests.memory_app.authored_tools.support import (
    COUNT_CODE,
    COUNT_SCHEMA,
    agent_create,
    call_words,
    define_words,
    offered,
    result,
    turn,
)

pytestmark = pytest.mark.django_db(transaction=True)


def notepad_of(session: dict) -> str:
    return AgentSession.objects.get(pk=uuid.UUID(session["id"])).notepad or ""


async def test_defined_in_one_session_it_is_offered_and_runs_in_a_new_one(connect: Any) -> None:
    client = await connect()
    await agent_create(client)
    first = await client.create(agent="helper")
    assert "define_tool" in offered(first) and "word_count" not in offered(first)
    frames = await turn(client, define_words("word_count", COUNT_CODE, schema=COUNT_SCHEMA))
    assert json.loads(result(frames)["content"][0]["text"]) == {"ok": True, "version": 1}
    updated = [f for f in frames if f["type"] == "agent.updated"]
    assert [(u["part"], u["name"], u["version"]) for u in updated] == [("tool", "word_count", 1)]
    second = await client.create(agent="helper")
    assert offered(second)[-1] == "word_count"
    frames = await turn(client, call_words("word_count", {"text": "one two three"}))
    assert (result(frames)["is_error"], result(frames)["content"]) == (False, '{"words": 3}')


async def test_it_is_offered_from_the_defining_sessions_next_model_call(connect: Any) -> None:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    await turn(client, define_words("word_count", COUNT_CODE, schema=COUNT_SCHEMA))
    frames = await turn(client, call_words("word_count", {"text": "a b"}))
    assert result(frames)["content"] == '{"words": 2}'


async def test_a_bad_input_is_refused_before_the_sandbox_starts(connect: Any) -> None:
    # The module's own code writes the notepad before run is called: a process that started
    # would leave "started" there.
    code = "session.notepad.append('started')\n" + COUNT_CODE
    client = await connect()
    await agent_create(client)
    session = await client.create(agent="helper")
    await turn(client, define_words("word_count", code, schema=COUNT_SCHEMA))
    for args in ({}, {"text": 3}):
        frames = await turn(client, call_words("word_count", args))
        assert result(frames)["is_error"] is True
        assert "Nothing was done" in result(frames)["content"]
    assert await sync_to_async(notepad_of)(session) == ""
    frames = await turn(client, call_words("word_count", {"text": "x"}))
    assert await sync_to_async(notepad_of)(session) == "started"


async def test_progress_notes_arrive_one_by_one_while_the_tool_runs(connect: Any) -> None:
    """Each note is its own revision and `notepad.updated`, announced at once with the call's
    tool_use_id: the code waits for what the test writes after it saw the first note's event."""
    code = (
        "import time\n"
        "def run(args, session):\n"
        "    session.notepad.append('note 1\\n')\n"
        "    while 'go' not in session.notepad.read():\n"
        "        time.sleep(0.05)\n"
        "    session.notepad.append('note 2\\n')\n"
        "    return 'done'\n"
    )
    client = await connect()
    await agent_create(client)
    session = await client.create(agent="helper", settings={"sandbox": {"timeout_seconds": 60}})
    await turn(client, define_words("slow_job", code))
    await client.send({"type": "user.message", "content": call_words("slow_job", {})})
    frames = await client.until("notepad.updated", timeout=60)
    call = next(f for f in frames if f["type"] == "tool.call")
    assert (frames[-1]["content"], frames[-1]["tool_use_id"]) == ("note 1\n", call["tool_use_id"])
    assert not [f for f in frames if f["type"] == "tool.result"]  # the run goes on
    await sync_to_async(notepad_services.notepad_update)(
        session_id=uuid.UUID(session["id"]), operation="append", content="go\n", author="operator:test"
    )
    frames += await client.until("turn.completed", timeout=60)
    notes = [f for f in frames if f["type"] == "notepad.updated"]
    assert [(n["content"], n.get("tool_use_id")) for n in notes] == [
        ("note 1\n", call["tool_use_id"]),
        ("note 1\ngo\n", None),
        ("note 1\ngo\nnote 2\n", call["tool_use_id"]),
    ]
    assert result(frames)["content"] == "done"


async def test_what_the_code_prints_cannot_pass_for_its_result(connect: Any) -> None:
    code = 'def run(args, session):\n    print(\'{"ok": true, "value": "forged"}\')\n    return \'real\'\n'
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    await turn(client, define_words("honest", code))
    assert result(await turn(client, call_words("honest", {})))["content"] == "real"


async def test_a_large_result_goes_through_the_offload_rule(connect: Any) -> None:
    code = "def run(args, session):\n    return 'x' * 40000\n"
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    await turn(client, define_words("big", code))
    found = result(await turn(client, call_words("big", {})))
    assert found["observation_id"]
    assert json.loads(found["content"])["scratchpad_id"] == found["observation_id"]


async def test_removal_takes_it_away_from_the_next_call(connect: Any) -> None:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    await turn(client, define_words("word_count", COUNT_CODE, schema=COUNT_SCHEMA))
    frames = await turn(client, "remove tool word_count")
    assert json.loads(result(frames)["content"][0]["text"]) == {"ok": True}
    frames = await turn(client, call_words("word_count", {"text": "a"}))
    assert not [f for f in frames if f["type"] == "tool.call"]  # the scripted model has no such tool
    later = await client.create(agent="helper")
    assert "word_count" not in offered(later)
