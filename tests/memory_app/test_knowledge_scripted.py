"""The scripted model uses its agent's knowledge: `learn:`, `skill:`, `use skill`, `state`, and
says these need an agent in a session without one."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.knowledge.scripted import NEEDS_AGENT_REPLY
from tests.memory_app.knowledge_support import agent_reload, agent_session
from tests.memory_app.notepad_support import turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_scratchpad")]


def calls(frames: list[dict]) -> list[tuple[str, dict]]:
    return [(f["name"], f["input"]) for f in frames if f["type"] == "tool.call"]


def last_answer(frames: list[dict]) -> str:
    return [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"]


async def test_learn_appends_the_text_as_a_line_of_the_learned_instructions(connect: Any) -> None:
    client = await connect()
    _, agent = await agent_session(client)
    frames = await turn(client, "learn: The user prefers metric units")
    assert calls(frames) == [
        ("edit_system_prompt", {"operation": "append", "content": "The user prefers metric units\n"})
    ]
    assert (await agent_reload(agent)).learned == "The user prefers metric units\n"  # type: ignore[arg-type]
    assert last_answer(frames).startswith('edit_system_prompt returned: {"ok": true, "version": 1}')


async def test_skill_writes_the_skill_and_use_skill_reads_it(connect: Any) -> None:
    client = await connect()
    await agent_session(client)
    frames = await turn(client, "skill: weekly-report | Write the weekly report. | 1. Gather\n2. Write")
    assert calls(frames) == [
        (
            "write_skill",
            {
                "name": "weekly-report",
                "description": "Write the weekly report.",
                "content": "1. Gather\n2. Write",
            },
        )
    ]
    frames = await turn(client, "use skill weekly-report")
    assert calls(frames) == [("read_skill", {"name": "weekly-report"})]
    assert "1. Gather" in last_answer(frames)


@pytest.mark.parametrize(
    ("words", "value"),
    [
        ("state units=metric", "metric"),
        ("state count = 3", 3),
        ('state prefs={"a": [1, 2]}', {"a": [1, 2]}),
        ("state flag=true", True),
        ("state note=two words", "two words"),
    ],
)
async def test_state_key_value_sets_json_when_it_parses_else_the_string(
    connect: Any, words: str, value: Any
) -> None:
    client = await connect()
    await agent_session(client)
    frames = await turn(client, words)
    key = words.split(" ", 1)[1].split("=")[0].strip()
    assert calls(frames) == [("agent_state", {"action": "set", "key": key, "value": value})]


async def test_state_key_gets_it(connect: Any) -> None:
    client = await connect()
    await agent_session(client)
    await turn(client, "state units=metric")
    frames = await turn(client, "state units")
    assert calls(frames) == [("agent_state", {"action": "get", "key": "units"})]
    assert '"value": "metric"' in last_answer(frames)


@pytest.mark.parametrize("words", ["learn: x", "skill: a | b | c", "use skill a", "state k=v", "state k"])
async def test_without_an_agent_the_reply_says_these_need_an_agent(connect: Any, words: str) -> None:
    client = await connect()
    await agent_session(client, agent=None)
    frames = await turn(client, words)
    assert calls(frames) == []
    assert last_answer(frames) == NEEDS_AGENT_REPLY


async def test_help_lists_the_knowledge_rules(connect: Any) -> None:
    client = await connect()
    await agent_session(client)
    answer = last_answer(await turn(client, "help"))
    for start in ("learn: TEXT", "skill: NAME | DESCRIPTION | BODY", "use skill NAME", "state KEY=VALUE"):
        assert start in answer
