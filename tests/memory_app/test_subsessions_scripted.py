"""The scripted model delegates (`spawn TASK`, `fork TASK`) and a scripted child reports its answer,
so a newcomer can watch a delegation without a key."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from memory_app.subsessions import prompts
from sessions_app.models import AgentSession, ToolCall
from tests.memory_app.subsessions_support import of, turn_of

pytestmark = pytest.mark.django_db(transaction=True)


def said(frames: list[dict], session_id: str) -> str:
    """The session's last assistant text."""
    message = of(frames, session_id, "assistant.message")[-1]
    return "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")


def reported(frames: list[dict], session_id: str) -> dict:
    """What the session's spawn/fork call returned."""
    (result,) = [
        f for f in of(frames, session_id, "tool.result") if f["name"] in ("spawn_session", "fork_session")
    ]
    return json.loads(result["content"])


async def test_spawn_delegates_and_the_child_reports_its_answer(connect):
    client = await connect()
    session = await client.create()
    frames = await turn_of(client, session, "spawn echo 42")
    (spawned,) = of(frames, session["id"], "session.spawned")
    child_id = spawned["child_session_id"]
    assert (spawned["mode"], spawned["title"]) == ("spawn", "echo 42")
    # The child answered its task and sent that answer with report_result, in one step.
    (child_answer,) = of(frames, child_id, "assistant.message")
    assert child_answer["content"][0] == {"type": "text", "text": "42"}
    assert child_answer["content"][1]["name"] == "report_result"
    assert child_answer["content"][1]["input"] == {"result": "42"}
    assert of(frames, child_id, "turn.completed")[0]["stop_reason"] == "end_turn"
    assert reported(frames, session["id"]) == {"session_id": child_id, "status": "reported", "result": "42"}
    assert said(frames, session["id"]).startswith("spawn_session returned: ")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_fork_copies_the_conversation_and_reports(connect):
    client = await connect()
    session = await client.create()
    await turn_of(client, session, "echo first")
    frames = await turn_of(client, session, "fork echo from the fork")
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    assert reported(frames, session["id"])["result"] == "from the fork"
    child = await sync_to_async(AgentSession.objects.get)(pk=child_id)
    assert child.spawn_mode == "fork" and child.next_position > 2  # the copied turn, then its own
    await client.close()


async def test_a_child_that_needs_a_tool_reports_the_tools_result(connect):
    client = await connect()
    session = await client.create()
    frames = await turn_of(client, session, "spawn remember: the key is blue")
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    assert of(frames, child_id, "notepad.updated")[0]["content"] == "the key is blue\n"
    outcome = reported(frames, session["id"])
    assert (outcome["status"], outcome["result"]) == ("reported", 'update_notepad returned: {"ok": true}')
    # The child's notepad is its own.
    parent = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    assert parent.notepad is None
    await client.close()


async def test_nested_delegation_goes_two_levels_down(connect):
    client = await connect()
    session = await client.create()
    frames = await turn_of(client, session, "spawn spawn echo deep")
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    grandchild_id = of(frames, child_id, "session.spawned")[0]["child_session_id"]
    grandchild = await sync_to_async(AgentSession.objects.get)(pk=grandchild_id)
    assert (grandchild.depth, str(grandchild.root_session_id)) == (2, session["id"])
    assert reported(frames, child_id)["result"] == "deep"
    assert reported(frames, session["id"])["status"] == "reported"
    reports = await sync_to_async(lambda: ToolCall.objects.filter(name="report_result").count())()
    assert reports == 2
    await client.close()


async def test_scripted_model_says_when_it_cannot_delegate(connect):
    client = await connect()
    session = await client.create(settings={"subsessions": {"enabled": False}})
    frames = await turn_of(client, session, "spawn echo 1")
    assert said(frames, session["id"]) == prompts.SCRIPTED_CANNOT_DELEGATE
    await client.close()


async def test_help_lists_delegation(connect):
    client = await connect()
    session = await client.create()
    frames = await turn_of(client, session, "help")
    assert "spawn TASK:" in said(frames, session["id"]) and "fork TASK:" in said(frames, session["id"])
    await client.close()
