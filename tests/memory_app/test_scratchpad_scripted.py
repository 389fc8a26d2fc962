"""The scripted model uses the scratchpad (README): `plan:`, `note:`, `ref:`, `scratchpad`."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.scratchpad import prompts
from sessions_app.engine.features import features
from sessions_app.engine.providers.scripted import parse_input
from tests.memory_app.scratchpad_support import open_session, pad, run_turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_notepad")]


def said(frames: list[dict]) -> list[str]:
    return [
        block["text"]
        for frame in frames
        if frame["type"] == "assistant.message"
        for block in frame["content"]
        if block["type"] == "text"
    ]


def results(frames: list[dict]) -> list[tuple[str, bool]]:
    return [(f["content"], f["is_error"]) for f in frames if f["type"] == "tool.result"]


async def test_plan_command_sets_a_numbered_plan(connect: Any) -> None:
    client, session_id = await open_session(connect)

    frames = await run_turn(client, "plan: read the code; fix the bug; add a test")

    assert (await pad(session_id)).plan == "1. read the code\n2. fix the bug\n3. add a test"
    assert results(frames) == [("plan set: 45/2000 chars used", False)]
    assert said(frames)[-1] == "session_scratchpad returned: plan set: 45/2000 chars used"


async def test_note_command_appends_to_the_notes(connect: Any) -> None:
    client, session_id = await open_session(connect)

    await run_turn(client, "note: the bug is in tz handling")
    await run_turn(client, "Note: tests live in tests/")

    assert (await pad(session_id)).notes == "the bug is in tz handling\ntests live in tests/"


async def test_ref_command_adds_a_ref(connect: Any) -> None:
    client, session_id = await open_session(connect)

    frames = await run_turn(client, "ref: src/auth/login.ts")

    assert (await pad(session_id)).refs == ["src/auth/login.ts"]
    assert results(frames) == [("ref added: 1/50 refs used", False)]


async def test_scratchpad_command_reports_the_block_it_received(connect: Any) -> None:
    client, _ = await open_session(connect)
    await run_turn(client, "ref: src/a.py")

    frames = await run_turn(client, "scratchpad")

    assert said(frames) == [
        "My scratchpad holds:\n[Session Scratchpad - your persistent working memory]\n"
        "## Refs (1/50)\n- src/a.py\n[End Scratchpad]"
    ]


async def test_scratchpad_command_with_an_empty_scratchpad(connect: Any) -> None:
    client, _ = await open_session(connect)

    frames = await run_turn(client, "scratchpad")

    assert said(frames) == ["My scratchpad is empty."]


async def test_commands_with_the_scratchpad_off_call_no_tool(connect: Any) -> None:
    client, session_id = await open_session(connect, settings={"scratchpad": {"enabled": False}})

    frames = await run_turn(client, "plan: a; b")

    assert said(frames) == ["My scratchpad is switched off in this session."]
    assert results(frames) == []
    assert (await pad(session_id)).plan == ""


async def test_help_lists_the_scratchpad_commands(connect: Any) -> None:
    client, _ = await open_session(connect)

    (reply,) = said(await run_turn(client, "help"))

    assert "plan: a; b; c" in reply
    assert "note: TEXT" in reply
    assert "ref: X" in reply


@pytest.mark.parametrize(
    "hint",
    [
        prompts.hint_after_turns(3),
        prompts.hint_after_turns(1),
        prompts.HINT_PLAN_DETECTED,
        prompts.HINT_AFTER_COMPACTION,
        prompts.hint_stale(3),
        prompts.hint_stale(1),
    ],
)
def test_after_tool_results_the_scripted_model_takes_hints_and_the_block_for_no_words(hint: str) -> None:
    block = f"{prompts.BLOCK_START}\n## Plan (4/2000 chars)\n1. go\n{prompts.BLOCK_END}"
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}],
            },
            {
                "role": "user",
                "content": [result, {"type": "text", "text": hint}, {"type": "text", "text": block}],
            },
        ]
    }
    inp = parse_input(body, features().context_openings)
    assert (inp.user_text, inp.tool_results) == (None, [{"name": "t", "content": "done", "is_error": False}])
