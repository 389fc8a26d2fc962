"""The knowledge tools through the agent websocket and the fake Messages API: which sessions are
offered them, what each returns, what the model reads on every misuse, and `agent.updated`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_app.knowledge import prompts
from memory_app.notepad.tools import UPDATE_NOTEPAD_SCHEMA
from sessions_app import agent_knowledge_selectors as selectors
from sessions_app.common.db import db
from tests.fake_anthropic import FakeAnthropicServer
from tests.memory_app.knowledge_support import (
    KNOWLEDGE_TOOLS,
    agent_reload,
    agent_session,
    offered,
    one_call,
)
from tests.memory_app.notepad_support import tool_result_sent, turn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_scratchpad", "without_tasks"),
]


def result_texts(body: dict) -> tuple[list[str], bool]:
    """The tool result's text blocks (a plain string as one), and whether it is an error."""
    result = tool_result_sent(body)
    content = result["content"]
    texts = [content] if isinstance(content, str) else [b["text"] for b in content if b["type"] == "text"]
    return texts, bool(result.get("is_error"))


def updated(frames: list[dict]) -> list[dict]:
    return [
        {k: f[k] for k in ("agent", "part", "name", "version", "author")}
        for f in frames
        if f["type"] == "agent.updated"
    ]


# -- what is offered -----------------------------------------------------------------
async def test_a_session_of_an_agent_is_offered_the_five_tools_first(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client)
    await turn(client)
    names = offered(fake_anthropic.requests[0].body)
    assert names[:5] == KNOWLEDGE_TOOLS


async def test_edit_system_prompt_has_update_notepads_schema(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client)
    await turn(client)
    tools = {t["name"]: t for t in fake_anthropic.requests[0].body["tools"]}
    assert tools["edit_system_prompt"]["input_schema"] == UPDATE_NOTEPAD_SCHEMA


async def test_a_session_without_an_agent_is_offered_none_of_them(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, agent=None)
    await turn(client)
    assert not set(KNOWLEDGE_TOOLS) & set(offered(fake_anthropic.requests[0].body))


async def test_learned_editable_and_skills_writable_off_withdraw_their_tools(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, settings={"knowledge": {"learned_editable": False, "skills_writable": False}})
    await turn(client)
    names = offered(fake_anthropic.requests[0].body)
    assert [n for n in names if n in KNOWLEDGE_TOOLS] == ["read_skill", "agent_state"]


async def test_calling_one_without_an_agent_tells_the_model_it_needs_an_agent(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, agent=None)
    body, _ = await one_call(client, fake_anthropic, "agent_state", {"action": "list"})
    assert result_texts(body) == ([prompts.NO_AGENT], True)


async def test_calling_edit_system_prompt_where_it_is_off_says_so(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, settings={"knowledge": {"learned_editable": False}})
    body, _ = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "x"}
    )
    assert result_texts(body) == ([prompts.LEARNED_NOT_EDITABLE], True)


# -- edit_system_prompt --------------------------------------------------------------
async def test_edit_system_prompt_returns_the_version_and_when_it_takes_effect(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session, agent = await agent_session(client)
    assert agent is not None
    body, frames = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "Be brief.\n"}
    )
    assert result_texts(body) == (['{"ok": true, "version": 1}', prompts.TAKES_EFFECT_AT_COMPACTION], False)
    assert ((await agent_reload(agent)).learned, (await agent_reload(agent)).learned_version) == (
        "Be brief.\n",
        1,
    )
    assert updated(frames) == [
        {"agent": "helper", "part": "learned", "name": "", "version": 1, "author": f"agent:{session['id']}"}
    ]


async def test_with_refresh_immediate_the_result_says_from_the_next_call(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, settings={"knowledge": {"refresh": "immediate"}})
    body, _ = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "x"}
    )
    assert result_texts(body)[0][1] == prompts.TAKES_EFFECT_NOW


async def test_edit_system_prompt_text_not_found_is_a_tool_error_with_the_current_text(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    _, agent = await agent_session(client)
    await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "Keep A.\n"}
    )
    body, frames = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "delete", "content": "Keep B."}
    )
    (message,), is_error = result_texts(body)
    assert is_error and message.startswith('The "content" to delete does not occur in the learned text')
    assert message.endswith("\n\nKeep A.\n")
    assert updated(frames) == []
    assert (await agent_reload(agent)).learned_version == 1  # type: ignore[arg-type]


async def test_an_edit_over_learned_max_chars_is_a_tool_error_and_changes_nothing(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    _, agent = await agent_session(client, settings={"knowledge": {"learned_max_chars": 10}})
    await one_call(client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "123456"})
    body, _ = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "7890a"}
    )
    (message,), is_error = result_texts(body)
    assert is_error and "11 characters, over its limit of 10" in message
    # One text over the limit by itself is refused before the handler, naming the setting.
    body, _ = await one_call(
        client, fake_anthropic, "edit_system_prompt", {"operation": "append", "content": "x" * 11}
    )
    (message,), is_error = result_texts(body)
    assert is_error and "knowledge.learned_max_chars" in message
    assert (await agent_reload(agent)).learned == "123456"  # type: ignore[arg-type]


# -- skills --------------------------------------------------------------------------
async def test_write_then_read_a_skill(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    client = await connect()
    session, _ = await agent_session(client)
    skill = {"name": "weekly-report", "description": "Write the weekly report.", "content": "1. Gather."}
    body, frames = await one_call(client, fake_anthropic, "write_skill", skill)
    assert result_texts(body) == (
        ['{"ok": true, "version": 1}', prompts.TAKES_EFFECT_AT_COMPACTION + prompts.SKILL_READABLE_NOW],
        False,
    )
    assert updated(frames) == [
        {
            "agent": "helper",
            "part": "skill",
            "name": "weekly-report",
            "version": 1,
            "author": f"agent:{session['id']}",
        }
    ]
    body, _ = await one_call(client, fake_anthropic, "read_skill", {"name": "weekly-report"})
    assert json.loads(result_texts(body)[0][0]) == skill


async def test_a_bad_skill_name_is_a_tool_error(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    client = await connect()
    await agent_session(client)
    body, _ = await one_call(
        client, fake_anthropic, "write_skill", {"name": "Weekly_Report", "description": "d", "content": "c"}
    )
    (message,), is_error = result_texts(body)
    assert is_error and '"Weekly_Report" is not a valid skill name' in message


async def test_reading_an_unknown_skill_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client)
    body, _ = await one_call(client, fake_anthropic, "read_skill", {"name": "nope"})
    assert result_texts(body) == (['The agent has no skill named "nope". Its skills: none yet.'], True)


async def test_delete_skill(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    client = await connect()
    _, agent = await agent_session(client)
    await one_call(client, fake_anthropic, "write_skill", {"name": "a", "description": "d", "content": "c"})
    body, frames = await one_call(client, fake_anthropic, "delete_skill", {"name": "a"})
    assert result_texts(body) == (['{"ok": true}', prompts.TAKES_EFFECT_AT_COMPACTION], False)
    assert [f["version"] for f in updated(frames)] == [2]
    assert await db(selectors.agent_skills_list)(agent_id=agent.pk) == []  # type: ignore[union-attr]


async def test_a_skill_past_max_skills_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client, settings={"knowledge": {"max_skills": 0}})
    body, _ = await one_call(
        client, fake_anthropic, "write_skill", {"name": "a", "description": "d", "content": "c"}
    )
    (message,), is_error = result_texts(body)
    assert is_error and "already has 0 skills" in message


# -- agent_state ---------------------------------------------------------------------
async def test_agent_state_set_get_list_delete(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    client = await connect()
    session, _ = await agent_session(client)
    body, frames = await one_call(
        client, fake_anthropic, "agent_state", {"action": "set", "key": "a/x", "value": [1]}
    )
    assert result_texts(body) == (['{"ok": true, "version": 1}'], False)
    assert updated(frames) == [
        {"agent": "helper", "part": "state", "name": "a/x", "version": 1, "author": f"agent:{session['id']}"}
    ]
    body, _ = await one_call(client, fake_anthropic, "agent_state", {"action": "get", "key": "a/x"})
    assert json.loads(result_texts(body)[0][0]) == {"key": "a/x", "value": [1], "version": 1}
    body, _ = await one_call(client, fake_anthropic, "agent_state", {"action": "list", "prefix": "a/"})
    assert json.loads(result_texts(body)[0][0]) == {"keys": ["a/x"]}
    body, _ = await one_call(client, fake_anthropic, "agent_state", {"action": "delete", "key": "a/x"})
    assert result_texts(body) == (['{"ok": true}'], False)
    body, _ = await one_call(client, fake_anthropic, "agent_state", {"action": "get", "key": "a/x"})
    assert result_texts(body)[1] is True


async def test_agent_state_set_with_a_stale_expected_version_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_session(client)
    await one_call(client, fake_anthropic, "agent_state", {"action": "set", "key": "k", "value": 1})
    body, frames = await one_call(
        client,
        fake_anthropic,
        "agent_state",
        {"action": "set", "key": "k", "value": 2, "expected_version": 0},
    )
    (message,), is_error = result_texts(body)
    assert is_error and 'The key "k" is at version 1, not version 0' in message
    assert updated(frames) == []


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"action": "get"}, 'agent_state with action "get" needs "key".'),
        ({"action": "set", "key": "k"}, 'agent_state with action "set" needs "value".'),
        ({"action": "delete"}, 'agent_state with action "delete" needs "key".'),
    ],
)
async def test_agent_state_without_a_needed_field_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, tool_input: dict, message: str
) -> None:
    client = await connect()
    await agent_session(client)
    body, _ = await one_call(client, fake_anthropic, "agent_state", tool_input)
    assert result_texts(body) == ([message], True)


async def test_a_write_by_one_session_is_read_at_once_by_another_of_the_agent(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    first, second = await connect(), await connect()
    await agent_session(first)
    await agent_session(second)
    await one_call(first, fake_anthropic, "agent_state", {"action": "set", "key": "k", "value": "v"})
    body, _ = await one_call(second, fake_anthropic, "agent_state", {"action": "get", "key": "k"})
    assert json.loads(result_texts(body)[0][0])["value"] == "v"
