"""Where the scratchpad appears in what the model receives: the block before the latest user
message (seed 001's markers, only non-empty spaces, never stored), the guidance in the system
prompt, the tool; and none of them when the scratchpad is switched off."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.scratchpad import prompts
from memory_app.scratchpad.context import scratchpad_block_render
from memory_app.scratchpad.selectors import ScratchpadView
from memory_app.scratchpad.services import ScratchpadLimits, scratchpad_space_set
from sessions_app.authors import operator_author
from sessions_app.models import Message, ModelCall
from tests.fake_anthropic import text, tool_use
from tests.memory_app.scratchpad_support import (
    TOOL,
    blocks_in,
    bodies,
    latest_user,
    open_session,
    run_turn,
    seed,
    system_text,
    texts,
    tool_names,
    tool_results,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_notepad", "without_tasks"),
]

OFF = {"settings": {"scratchpad": {"enabled": False}}}
LIMITS = ScratchpadLimits(notes_max_chars=4000, plan_max_chars=2000, refs_max_items=50)


# ---------------------------------------------------------------------------
# the block
# ---------------------------------------------------------------------------
def test_block_renders_the_three_spaces_inside_seed_001_markers() -> None:
    view = ScratchpadView(notes="Root cause: tz", plan="1. Fix\n2. Test", refs=["src/a.ts", "https://x/1"])

    assert scratchpad_block_render(view=view, limits=LIMITS) == (
        "[Session Scratchpad - your persistent working memory]\n"
        "## Notes (14/4000 chars)\n"
        "Root cause: tz\n"
        "\n"
        "## Plan (14/2000 chars)\n"
        "1. Fix\n2. Test\n"
        "\n"
        "## Refs (2/50)\n"
        "- src/a.ts\n"
        "- https://x/1\n"
        "[End Scratchpad]"
    )


async def test_no_block_when_every_space_is_empty(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (body,) = bodies(fake_anthropic)
    assert texts(latest_user(body)) == ["hello"]


async def test_block_is_prepended_to_the_latest_user_message(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "set_notes", "content": "remember me"})
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (body,) = bodies(fake_anthropic)
    assert texts(latest_user(body)) == [
        prompts.BLOCK_START + "\n## Notes (11/4000 chars)\nremember me\n" + prompts.BLOCK_END,
        "hello",
    ]


async def test_block_shows_only_the_non_empty_spaces(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.add", "ref": "src/a.py"})
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (block,) = blocks_in(bodies(fake_anthropic)[0])
    assert block == prompts.BLOCK_START + "\n## Refs (1/50)\n- src/a.py\n" + prompts.BLOCK_END


async def test_block_follows_the_tool_results_in_the_same_turn(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_plan", "content": "1. a"}), text("ok"))

    await run_turn(client, "plan it")

    after_tool = bodies(fake_anthropic)[1]
    last = after_tool["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert last[1]["text"] == prompts.BLOCK_START + "\n## Plan (4/2000 chars)\n1. a\n" + prompts.BLOCK_END


async def test_older_user_messages_carry_no_old_block(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "v1"}), text("ok"))
    await run_turn(client, "first")
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "v2"}), text("ok"))
    await run_turn(client, "second")

    last_body = bodies(fake_anthropic)[-1]
    # Only one block in the whole request, in the latest user message, with the current notes.
    (block,) = blocks_in(last_body)
    assert "\nv2\n" in block
    assert block in texts(last_body["messages"][-1])
    assert texts(last_body["messages"][0]) == ["first"]


async def test_block_is_never_stored_in_history(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "secret plan"}), text("ok"))
    await run_turn(client, "first")
    fake_anthropic.enqueue(text("ok"))
    await run_turn(client, "second")

    stored = await sync_to_async(
        lambda: list(Message.objects.filter(session_id=session_id).values_list("content", flat=True))
    )()
    assert len(stored) == 6
    assert all(prompts.BLOCK_START not in str(content) for content in stored)


async def test_recorded_model_call_shows_the_block_it_sent(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "set_notes", "content": "n"})
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    record = await sync_to_async(lambda: ModelCall.objects.get(session_id=session_id).request)()
    assert prompts.BLOCK_START in str(record["messages"][-1])


async def test_operator_edit_shows_in_the_next_request(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await sync_to_async(scratchpad_space_set)(
        session_id=session_id,
        space="plan",
        value="1. ship",
        author=operator_author("alice"),
        expected_version=0,
    )
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (block,) = blocks_in(bodies(fake_anthropic)[0])
    assert "## Plan (7/2000 chars)\n1. ship" in block


# ---------------------------------------------------------------------------
# guidance and tool
# ---------------------------------------------------------------------------
async def test_guidance_is_in_the_system_prompt(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, system_prompt="You are helpful.")
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    system = system_text(bodies(fake_anthropic)[0])
    assert system.startswith("You are helpful.\n\n## Session Scratchpad\n")
    assert (
        "You have a persistent scratchpad tool (session_scratchpad) that survives context compaction."
        in system
    )
    assert "Use it to save: multi-step plans, key findings, important decisions, accumulated state." in system
    assert "Budget: notes 4000 chars, plan 2000 chars, refs 50 items." in system


async def test_guidance_gives_the_session_limits(connect: Any, fake_anthropic: Any) -> None:
    settings = {"scratchpad": {"notes_max_chars": 900, "plan_max_chars": 300, "refs_max_items": 7}}
    client, _ = await open_session(connect, settings=settings)
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    assert "Budget: notes 900 chars, plan 300 chars, refs 7 items." in system_text(bodies(fake_anthropic)[0])


async def test_guidance_mentions_hints_only_when_a_nudge_is_on(connect: Any, fake_anthropic: Any) -> None:
    plain, _ = await open_session(connect)
    nudged, _ = await open_session(connect, settings={"scratchpad": {"nudge_after_compaction": 1}})
    fake_anthropic.enqueue(text("ok"), text("ok"))

    await run_turn(plain, "hello")
    await run_turn(nudged, "hello")

    first, second = bodies(fake_anthropic)
    assert "[Hint: ...]" not in system_text(first)
    assert prompts.GUIDANCE_NUDGES in system_text(second)


async def test_tool_is_offered_with_its_schema(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (tool,) = [t for t in bodies(fake_anthropic)[0]["tools"] if t["name"] == TOOL]
    schema = tool["input_schema"]
    assert schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == [
        "set_notes",
        "append_notes",
        "set_plan",
        "refs.add",
        "refs.remove",
        "refs.set",
    ]
    assert schema["properties"]["items"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": prompts.ITEMS_DESCRIPTION,
    }
    assert tool["description"].startswith(
        "Persist important working state (plans, findings, decisions) that survives context compaction."
    )


# ---------------------------------------------------------------------------
# switched off
# ---------------------------------------------------------------------------
async def test_disabled_scratchpad_has_no_tool(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **OFF)
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    assert TOOL not in tool_names(bodies(fake_anthropic)[0])


async def test_disabled_scratchpad_has_no_guidance(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, system_prompt="Be brief.", **OFF)
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    assert system_text(bodies(fake_anthropic)[0]) == "Be brief."


async def test_disabled_scratchpad_shows_no_block_even_with_content(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(connect, **OFF)
    await seed(session_id, {"action": "set_notes", "content": "kept from before"})
    fake_anthropic.enqueue(text("ok"))

    await run_turn(client, "hello")

    (body,) = bodies(fake_anthropic)
    assert blocks_in(body) == []
    assert texts(latest_user(body)) == ["hello"]


async def test_disabled_scratchpad_refuses_a_call_anyway(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **OFF)
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "x"}), text("ok"))

    await run_turn(client, "hello")

    (result,) = tool_results(bodies(fake_anthropic)[1])
    assert result["is_error"] is True
    assert result["content"].startswith("Unknown tool 'session_scratchpad'")
    assert blocks_in(bodies(fake_anthropic)[1]) == []
