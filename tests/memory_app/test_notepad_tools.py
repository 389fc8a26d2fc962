"""The notepad tools through the fake Messages API: for every operation and every misuse, exactly
what the model is given back and what its next request shows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_app.notepad.prompts import NOTEPAD_EMPTY_HINT, NOTEPAD_GUIDANCE
from sessions_app.engine.context import CACHE_CONTROL
from tests.fake_anthropic import FakeAnthropicServer, Reply, text, tool_use
from tests.memory_app.notepad_support import (
    notepad_last_section,
    notepad_preset,
    tool_result_sent,
    turn,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_scratchpad", "without_tasks"),
]

OK_RESULT = '{"ok": true}'


async def run_tool(
    connect: Any, fake: FakeAnthropicServer, name: str, tool_input: dict, *, notepad: str | None = None
) -> tuple[dict, list[dict]]:
    """One turn in which the model calls `name` once then says "done"; returns the request the
    model received after the call and the turn's frames."""
    client = await connect()
    session = await client.create()
    if notepad is not None:
        await notepad_preset(session, notepad)
    fake.enqueue(tool_use(name, tool_input), text("done"))
    frames = await turn(client)
    assert len(fake.requests) == 2
    return fake.requests[1].body, frames


def notepad_section(body: dict) -> str:
    return notepad_last_section(body)


# -- the tools offered ---------------------------------------------------------------
SEED_SCHEMAS = {
    "read_notepad": {"type": "object", "properties": {}, "required": []},
    "write_notepad": {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The new notepad content (replaces everything)"}
        },
        "required": ["content"],
    },
    "update_notepad": {
        "type": "object",
        "properties": {
            "operation": {
                "type": "string",
                "enum": ["find_replace", "append", "prepend", "delete"],
                "description": "The type of edit to perform",
            },
            "content": {
                "type": "string",
                "description": "For append/prepend: text to add. For delete: text to remove.",
            },
            "find": {"type": "string", "description": "For find_replace: exact substring to find"},
            "replace": {"type": "string", "description": "For find_replace: replacement text"},
            "replace_all": {
                "type": "boolean",
                "description": "For find_replace: replace all occurrences. Default: false.",
            },
        },
        "required": ["operation"],
    },
}


async def test_the_model_is_offered_the_three_tools_with_the_seed_schemas(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create()
    await turn(client)
    offered = {t["name"]: t["input_schema"] for t in fake_anthropic.requests[0].body["tools"]}
    assert {name: offered.get(name) for name in SEED_SCHEMAS} == SEED_SCHEMAS


# -- read_notepad ----------------------------------------------------------------------
async def test_read_notepad_returns_the_content(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    body, _ = await run_tool(connect, fake_anthropic, "read_notepad", {}, notepad="## Plan\n- [ ] a\n")
    result = tool_result_sent(body)
    assert (result["content"], result.get("is_error")) == ('{"content": "## Plan\\n- [ ] a\\n"}', None)


async def test_read_notepad_returns_an_empty_string_before_anything_is_written(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body, _ = await run_tool(connect, fake_anthropic, "read_notepad", {})
    assert tool_result_sent(body)["content"] == '{"content": ""}'


# -- write_notepad ---------------------------------------------------------------------
async def test_write_notepad_replaces_the_section_in_the_next_request(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body, _ = await run_tool(
        connect, fake_anthropic, "write_notepad", {"content": "## Findings\n- 500 rows\n"}, notepad="old"
    )
    assert tool_result_sent(body)["content"] == OK_RESULT
    # Position `epoch` (the default): the system prompt keeps the epoch's copy, the current one
    # is the last the model reads.
    assert body["system"] == [
        {"type": "text", "text": NOTEPAD_GUIDANCE, "cache_control": CACHE_CONTROL},
        {"type": "text", "text": "## Session Notepad\nold"},
    ]
    assert notepad_section(body) == "## Session Notepad\n## Findings\n- 500 rows\n"


async def test_write_notepad_with_empty_content_brings_back_the_hint(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body, _ = await run_tool(connect, fake_anthropic, "write_notepad", {"content": ""}, notepad="notes")
    assert notepad_section(body) == f"## Session Notepad\n{NOTEPAD_EMPTY_HINT}"


async def test_write_notepad_announces_notepad_updated(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    _, frames = await run_tool(connect, fake_anthropic, "write_notepad", {"content": "plan"})
    updates = [(f["content"], f["version"], f["author"]) for f in frames if f["type"] == "notepad.updated"]
    assert updates == [("plan", 1, "agent")]


# -- update_notepad: each operation ------------------------------------------------------
UPDATES = [
    pytest.param(
        {"operation": "append", "content": "- sheet 2: 180 rows\n"},
        "- sheet 1: 500 rows\n- sheet 2: 180 rows\n",
        id="append",
    ),
    pytest.param(
        {"operation": "append", "content": "no newline"},
        "- sheet 1: 500 rows\nno newline",
        id="append_as_given",
    ),
    pytest.param(
        {"operation": "prepend", "content": "## Findings\n"},
        "## Findings\n- sheet 1: 500 rows\n",
        id="prepend",
    ),
    pytest.param(
        {"operation": "find_replace", "find": "500", "replace": "501"},
        "- sheet 1: 501 rows\n",
        id="find_replace",
    ),
    pytest.param({"operation": "delete", "content": " rows"}, "- sheet 1: 500\n", id="delete"),
]


@pytest.mark.parametrize(("tool_input", "expected"), UPDATES)
async def test_update_notepad_shows_the_edited_notepad_in_the_next_request(
    connect: Any, fake_anthropic: FakeAnthropicServer, tool_input: dict, expected: str
) -> None:
    body, _ = await run_tool(
        connect, fake_anthropic, "update_notepad", tool_input, notepad="- sheet 1: 500 rows\n"
    )
    assert tool_result_sent(body)["content"] == OK_RESULT
    assert notepad_section(body) == f"## Session Notepad\n{expected}"


async def test_find_replace_changes_only_the_first_occurrence(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    tool_input = {"operation": "find_replace", "find": "[ ]", "replace": "[x]"}
    body, _ = await run_tool(
        connect, fake_anthropic, "update_notepad", tool_input, notepad="- [ ] a\n- [ ] b\n"
    )
    assert notepad_section(body) == "## Session Notepad\n- [x] a\n- [ ] b\n"


async def test_find_replace_with_replace_all_changes_every_occurrence(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    tool_input = {"operation": "find_replace", "find": "[ ]", "replace": "[x]", "replace_all": True}
    body, _ = await run_tool(
        connect, fake_anthropic, "update_notepad", tool_input, notepad="- [ ] a\n- [ ] b\n"
    )
    assert notepad_section(body) == "## Session Notepad\n- [x] a\n- [x] b\n"


async def test_delete_removes_every_occurrence(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    tool_input = {"operation": "delete", "content": "(stale) "}
    body, _ = await run_tool(
        connect, fake_anthropic, "update_notepad", tool_input, notepad="(stale) a\nb\n(stale) c\n"
    )
    assert notepad_section(body) == "## Session Notepad\na\nb\nc\n"


async def test_unused_fields_given_as_null_are_ignored(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    tool_input = {"operation": "append", "content": "b\n", "find": None, "replace": None, "replace_all": None}
    body, _ = await run_tool(connect, fake_anthropic, "update_notepad", tool_input, notepad="a\n")
    assert notepad_section(body) == "## Session Notepad\na\nb\n"


async def test_update_notepad_announces_notepad_updated(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    tool_input = {"operation": "append", "content": "b"}
    _, frames = await run_tool(connect, fake_anthropic, "update_notepad", tool_input, notepad="a")
    updates = [(f["content"], f["version"], f["author"]) for f in frames if f["type"] == "notepad.updated"]
    assert updates == [("a", 1, "agent"), ("ab", 2, "agent")]


# -- every misuse: a tool error the model reads; the notepad is unchanged -------------------
MISUSES = [
    pytest.param("update_notepad", {}, 'update_notepad needs "operation"', id="operation_missing"),
    pytest.param(
        "update_notepad",
        {"operation": 3},
        '"operation" must be one of find_replace, append, prepend, delete, not 3',
        id="operation_not_string",
    ),
    pytest.param(
        "update_notepad",
        {"operation": "rewrite", "content": "x"},
        '"operation" must be one of find_replace, append, prepend, delete, not "rewrite"',
        id="unknown_operation",
    ),
    pytest.param(
        "update_notepad", {"operation": "find_replace", "replace": "x"}, 'needs "find"', id="find_missing"
    ),
    pytest.param(
        "update_notepad",
        {"operation": "find_replace", "find": "", "replace": "x"},
        '"find" must not be empty',
        id="find_empty",
    ),
    pytest.param(
        "update_notepad", {"operation": "find_replace", "find": "a"}, 'needs "replace"', id="replace_missing"
    ),
    pytest.param(
        "update_notepad",
        {"operation": "find_replace", "find": "zzz", "replace": "x"},
        'The "find" text does not occur in the notepad',
        id="find_not_found",
    ),
    pytest.param(
        "update_notepad",
        {"operation": "find_replace", "find": "a", "replace": "x", "replace_all": "yes"},
        '"replace_all" must be true or false',
        id="replace_all_not_boolean",
    ),
    pytest.param(
        "update_notepad",
        {"operation": "find_replace", "find": 1, "replace": "x"},
        '"find" must be a string',
        id="find_not_string",
    ),
    pytest.param(
        "update_notepad", {"operation": "append"}, 'operation "append" needs "content"', id="append_missing"
    ),
    pytest.param(
        "update_notepad",
        {"operation": "append", "content": ""},
        '"content" must not be empty',
        id="append_empty",
    ),
    pytest.param(
        "update_notepad",
        {"operation": "append", "content": ["x"]},
        '"content" must be a string',
        id="append_not_string",
    ),
    pytest.param(
        "update_notepad",
        {"operation": "prepend"},
        'operation "prepend" needs "content"',
        id="prepend_missing",
    ),
    pytest.param(
        "update_notepad", {"operation": "delete"}, 'operation "delete" needs "content"', id="delete_missing"
    ),
    pytest.param(
        "update_notepad",
        {"operation": "delete", "content": "zzz"},
        'The "content" to delete does not occur in the notepad',
        id="delete_not_found",
    ),
    pytest.param("write_notepad", {}, 'write_notepad needs "content"', id="write_content_missing"),
    pytest.param(
        "write_notepad", {"content": 42}, '"content" must be a string', id="write_content_not_string"
    ),
]


@pytest.mark.parametrize(("name", "tool_input", "message"), MISUSES)
async def test_misuse_is_a_tool_error_the_model_reads_and_changes_nothing(
    connect: Any, fake_anthropic: FakeAnthropicServer, name: str, tool_input: dict, message: str
) -> None:
    body, frames = await run_tool(connect, fake_anthropic, name, tool_input, notepad="a\n")
    result = tool_result_sent(body)
    assert result["is_error"] is True
    assert message in result["content"]
    assert notepad_section(body) == "## Session Notepad\na\n"
    assert [f["version"] for f in frames if f["type"] == "notepad.updated"] == [1]


async def test_misuse_error_text_tells_the_model_what_to_do(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    tool_input = {"operation": "find_replace", "find": "zzz", "replace": "x"}
    body, _ = await run_tool(connect, fake_anthropic, "update_notepad", tool_input, notepad="a\n")
    assert tool_result_sent(body)["content"] == (
        'The "find" text does not occur in the notepad, so nothing was changed. It must match '
        "exactly (whitespace and case included); the notepad's current text is in your context, "
        "or call read_notepad."
    )


async def test_two_edits_in_one_step_apply_in_the_models_order(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create()
    write = {"type": "tool_use", "id": "toolu_w", "name": "write_notepad", "input": {"content": "a"}}
    append = {
        "type": "tool_use",
        "id": "toolu_a",
        "name": "update_notepad",
        "input": {"operation": "append", "content": "b"},
    }
    fake_anthropic.enqueue(Reply([write, append], stop_reason="tool_use"), text("done"))
    await turn(client)
    body = fake_anthropic.requests[1].body
    results = [b["content"] for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert (results, notepad_section(body)) == ([OK_RESULT, OK_RESULT], "## Session Notepad\nab")


async def test_tool_result_is_the_seeds_return_value(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body, _ = await run_tool(connect, fake_anthropic, "write_notepad", {"content": "x"})
    assert json.loads(tool_result_sent(body)["content"]) == {"ok": True}
