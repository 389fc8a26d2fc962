"""Where the notepad appears in what the model receives: the guidance, the `## Session Notepad`
section or its empty-state hint, its position (system prompt or latest user message), and the
cache breakpoint it must follow."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from memory_app.notepad import services
from memory_app.notepad.prompts import NOTEPAD_EMPTY_HINT, NOTEPAD_GUIDANCE
from sessions_app.engine.context import CACHE_CONTROL
from sessions_app.models import Message
from tests.fake_anthropic import FakeAnthropicServer, Reply, text, tool_use
from tests.memory_app.notepad_support import notepad_preset, system_texts, turn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_scratchpad", "without_tasks"),
]

HINT_SECTION = f"## Session Notepad\n{NOTEPAD_EMPTY_HINT}"
NOTEPAD_TOOLS = {"read_notepad", "write_notepad", "update_notepad"}
MESSAGE_POSITION = {"notepad": {"position": "message"}}
# Position `system` (the default before issue 32; `epoch` now is: test_notepad_epoch.py).
SYSTEM_POSITION = {"notepad": {"position": "system"}}


async def first_request(
    connect: Any, fake: FakeAnthropicServer, notepad: str | None = None, **create: Any
) -> dict:
    client = await connect()
    create.setdefault("settings", SYSTEM_POSITION)
    session = await client.create(**create)
    if notepad is not None:
        await notepad_preset(session, notepad)
    await turn(client, "hello")
    return fake.requests[0].body


# -- position "system" ---------------------------------------------------------
async def test_empty_notepad_shows_the_seed_hint_in_the_system_prompt(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic)
    assert system_texts(body) == [NOTEPAD_GUIDANCE, HINT_SECTION]


async def test_hint_is_the_seeds_text_verbatim() -> None:
    assert HINT_SECTION == (
        "## Session Notepad\n(empty — use write_notepad or update_notepad to save working notes, findings, "
        "and task progress; content here survives context compaction)"
    )


async def test_written_notepad_is_shown_in_full_instead_of_the_hint(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    notes = "## Plan\n- [x] Survey all sheets\n- [ ] Fix Q3 totals\n"
    body = await first_request(connect, fake_anthropic, notepad=notes)
    assert system_texts(body)[-1] == f"## Session Notepad\n{notes}"


async def test_cleared_notepad_shows_the_hint_again(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, notepad="")
    assert system_texts(body)[-1] == HINT_SECTION


async def test_guidance_follows_the_sessions_own_system_prompt(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, system_prompt="You analyse spreadsheets.")
    assert system_texts(body)[0] == f"You analyse spreadsheets.\n\n{NOTEPAD_GUIDANCE}"


async def test_guidance_is_the_seeds_text_verbatim() -> None:
    assert NOTEPAD_GUIDANCE == (
        "For multi-step or complex tasks, use the session notepad to track your plan and record findings as "
        "you work. The notepad survives context compaction — conversation details may be summarized, but the "
        "notepad is preserved in full. Update it after significant findings or completed steps."
    )


async def test_section_comes_after_the_system_prompts_cache_breakpoint(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, notepad="notes")
    stable, section = body["system"]
    assert (stable.get("cache_control"), "cache_control" in section) == (CACHE_CONTROL, False)
    assert section["text"] == "## Session Notepad\nnotes"


async def test_notepad_change_leaves_the_cached_prefix_unchanged(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create(settings=SYSTEM_POSITION)
    fake_anthropic.enqueue(tool_use("write_notepad", {"content": "found it"}), text("done"))
    await turn(client)
    before, after = fake_anthropic.requests[0].body, fake_anthropic.requests[1].body
    assert (before["tools"], before["system"][0]) == (after["tools"], after["system"][0])
    assert (before["system"][1]["text"], after["system"][1]["text"]) == (
        HINT_SECTION,
        "## Session Notepad\nfound it",
    )


# -- position "message" ----------------------------------------------------------------------
async def test_message_position_puts_the_section_at_the_start_of_the_latest_user_message(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, notepad="notes", settings=MESSAGE_POSITION)
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "## Session Notepad\nnotes"},
        {"type": "text", "text": "hello"},
    ]


async def test_message_position_keeps_only_the_guidance_in_the_system_prompt(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, notepad="notes", settings=MESSAGE_POSITION)
    assert body["system"] == [{"type": "text", "text": NOTEPAD_GUIDANCE, "cache_control": CACHE_CONTROL}]


async def test_message_position_shows_the_hint_while_empty(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, settings=MESSAGE_POSITION)
    assert body["messages"][-1]["content"][0] == {"type": "text", "text": HINT_SECTION}


async def test_message_position_after_tool_results_follows_them_and_shows_the_edit(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create(settings=MESSAGE_POSITION)
    fake_anthropic.enqueue(
        tool_use("update_notepad", {"operation": "append", "content": "x\n"}), text("done")
    )
    await turn(client)
    content = fake_anthropic.requests[1].body["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result", "text"]
    assert content[1] == {"type": "text", "text": "## Session Notepad\nx\n"}


async def test_message_position_section_is_never_stored_in_the_history(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=MESSAGE_POSITION)
    await notepad_preset(session, "notes")
    await turn(client, "first")
    stored = await sync_to_async(stored_texts)(session)
    assert stored == ["first", "ok"]


def stored_texts(session: dict) -> list[str]:
    messages = Message.objects.filter(session_id=uuid.UUID(session["id"])).order_by("position")
    return [block["text"] for m in messages for block in m.content or [] if block.get("type") == "text"]


async def test_message_position_section_leaves_the_earlier_user_message_in_the_next_turn(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=MESSAGE_POSITION)
    await notepad_preset(session, "notes")
    await turn(client, "first")
    await turn(client, "second")
    messages = fake_anthropic.requests[1].body["messages"]
    assert messages[0]["content"] == [{"type": "text", "text": "first"}]
    assert messages[-1]["content"] == [
        {"type": "text", "text": "## Session Notepad\nnotes"},
        {"type": "text", "text": "second"},
    ]


async def test_message_position_section_comes_after_the_history_cache_breakpoint(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create(settings=MESSAGE_POSITION)
    await turn(client, "first")
    await turn(client, "second")
    messages = fake_anthropic.requests[1].body["messages"]
    assert messages[-2]["content"][-1].get("cache_control") == CACHE_CONTROL
    assert all("cache_control" not in block for block in messages[-1]["content"])


# -- disabled ----------------------------------------------------------------------------------
async def test_disabled_notepad_offers_no_notepad_tools(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(connect, fake_anthropic, settings={"notepad": {"enabled": False}})
    assert NOTEPAD_TOOLS.isdisjoint(t["name"] for t in body.get("tools", []))


async def test_disabled_notepad_has_no_section_and_no_guidance(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = await first_request(
        connect,
        fake_anthropic,
        notepad="notes",
        system_prompt="Be brief.",
        settings={"notepad": {"enabled": False}},
    )
    assert system_texts(body) == ["Be brief."]
    assert [b["text"] for b in body["messages"][-1]["content"]] == ["hello"]


async def test_disabled_notepad_in_message_position_adds_nothing_to_the_message(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    settings = {"notepad": {"enabled": False, "position": "message"}}
    body = await first_request(connect, fake_anthropic, notepad="notes", settings=settings)
    assert ([b["text"] for b in body["messages"][-1]["content"]], "system" in body) == (["hello"], False)


async def test_disabled_notepad_refuses_a_call_to_its_tools(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"enabled": False}})
    fake_anthropic.enqueue(tool_use("write_notepad", {"content": "x"}), text("done"))
    await turn(client)
    result = fake_anthropic.requests[1].body["messages"][-1]["content"][0]
    assert (result["is_error"], result["content"]) == (
        True,
        "Unknown tool 'write_notepad'. Use one of the tools you were given.",
    )


async def test_message_position_after_a_tool_error_shows_the_unchanged_notepad(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=MESSAGE_POSITION)
    await notepad_preset(session, "notes\n")
    fake_anthropic.enqueue(
        tool_use("update_notepad", {"operation": "delete", "content": "zzz"}), text("done")
    )
    await turn(client)
    result, section = fake_anthropic.requests[1].body["messages"][-1]["content"]
    assert (result["is_error"], section) == (True, {"type": "text", "text": "## Session Notepad\nnotes\n"})


# -- an operator's edit during a turn ----------------------------------------------------------
async def test_operator_edit_during_a_turn_reaches_the_next_model_call(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=SYSTEM_POSITION)

    def operator_edits_then_model_reads(body: dict) -> Reply:
        # Runs in the fake server's thread while the turn waits for the model's answer.
        try:
            services.notepad_write(
                session_id=uuid.UUID(session["id"]),
                content="from the operator",
                author="operator:alice",
                expected_version=0,
            )
        finally:
            connection.close()
        return tool_use("read_notepad", {})

    fake_anthropic.enqueue(operator_edits_then_model_reads, text("done"))
    await turn(client)
    body = fake_anthropic.requests[1].body
    assert system_texts(body)[-1] == "## Session Notepad\nfrom the operator"
    assert body["messages"][-1]["content"][0]["content"] == '{"content": "from the operator"}'
