"""Issue 34's two promises end to end, on SQLite and on PostgreSQL, through the agent websocket,
the engine, the scripted model and (for the tool) the real jail:

- a fact told in the first turn of a session is found by `recall` after ten compactions, and
  from a new session of the same agent, and never from another client's agent of that name;
- an agent defines a tool in one session whose code writes progress notes to the notepad as it
  runs, and a new session of the agent uses it: its notes arrive one by one, naming the call.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.recall.scripted import NOTHING_FOUND
from sessions_app.models import AgentSession, Archive
from tests.conftest import chat
from tests.memory_app.authored_tools.support import agent_create, call_words, define_words, result, turn
from tests.sessions_app.conftest import NO_MEMORY

pytestmark = pytest.mark.django_db(transaction=True)

FILLER = "palimpsest " * 300  # about 900 tokens: a few turns cross the small window's threshold
SMALL: dict[str, Any] = {"context_window": 10_000, "compact_threshold": 0.3, "settings": NO_MEMORY}
FACT = "The spare key is under the blue flowerpot by the shed."
PROGRESS_CODE = (
    "def run(args, session):\n"
    "    total = 0\n"
    "    for part in range(1, args['parts'] + 1):\n"
    "        total += part\n"
    "        session.notepad.append(f'part {part} of {args[\"parts\"]} done\\n')\n"
    "    return {'total': total}\n"
)
PROGRESS_SCHEMA = {
    "type": "object",
    "properties": {"parts": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["parts"],
}


def answer(frames: list[dict]) -> str:
    return [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"]


async def fill_until_compacted(client: Any, times: int) -> None:
    done = 0
    for index in range(80):
        frames = await chat(client, f"request {index}: {FILLER}")
        done += sum(1 for f in frames if f["type"] == "compaction.completed")
        if done >= times:
            return
    raise AssertionError(f"only {done} compactions")


async def test_a_first_turn_fact_is_recalled_after_ten_compactions_and_by_a_new_session_only(
    connect: Any, make_token: Any, vendor: str
) -> None:
    client = await connect()
    await agent_create(client)
    first = await client.create(agent="helper", **SMALL)
    await chat(client, FACT)
    await fill_until_compacted(client, 10)
    archives = await sync_to_async(Archive.objects.filter(session_id=uuid.UUID(first["id"])).count)()
    assert archives >= 10
    assert FACT in answer(await chat(client, "recall: spare key flowerpot"))
    await client.create(agent="helper", **SMALL)
    assert FACT in answer(await chat(client, "recall: where is the spare key?"))
    other = await connect(await make_token("another-client"))
    await agent_create(other)
    await other.create(agent="helper", **SMALL)
    assert answer(await chat(other, "recall: spare key flowerpot")) == NOTHING_FOUND


async def test_a_tool_defined_in_one_session_writes_progress_notes_in_a_new_one(
    connect: Any, vendor: str
) -> None:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    frames = await turn(client, define_words("add_up", PROGRESS_CODE, schema=PROGRESS_SCHEMA))
    assert result(frames)["is_error"] is False
    second = await client.create(agent="helper")
    assert "add_up" in second["server_tools"]
    frames = await turn(client, call_words("add_up", {"parts": 3}))
    call = next(f for f in frames if f["type"] == "tool.call" and f["name"] == "add_up")
    notes = [f for f in frames if f["type"] == "notepad.updated"]
    assert [(n.get("note"), n.get("tool_use_id")) for n in notes] == [
        (f"part {i} of 3 done\n", call["tool_use_id"]) for i in (1, 2, 3)
    ]
    assert result(frames)["content"] == '{"total": 6}'
    notepad = await sync_to_async(
        lambda: AgentSession.objects.values_list("notepad", flat=True).get(pk=uuid.UUID(second["id"]))
    )()
    assert notepad == "part 1 of 3 done\npart 2 of 3 done\npart 3 of 3 done\n"
