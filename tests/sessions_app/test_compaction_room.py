"""A tool's result never takes more than the next request has room for (issue 30, item 3): the
engine gives each call its room (`ToolContext.room_tokens`), the reading tools fill their page up
to it, and a result that still does not fit is a tool error. Through the fake Messages API in
strict mode, which refuses any prompt over the window."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.common.content import OMITTED_MARKER
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.types import ToolOutcome
from sessions_app.engine import runner
from sessions_app.engine.archive import page_fit
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING
from sessions_app.engine.tool_dispatch import results_fit
from sessions_app.models import AgentSession, Archive, Message
from tests.conftest import chat
from tests.fake_anthropic import ErrorReply, FakeAnthropicServer, Reply, text, tool_use
from tests.features import FILL_ROOMS
from tests.sessions_app.conftest import NO_MEMORY, is_summary_call

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
WINDOW = 4600
# About 900 tokens a message.
FILLER = "palimpsest " * 300
# Results are not offloaded to observations here: the page itself must fit.
NO_OFFLOAD = {**NO_MEMORY, "offload": {"threshold_bytes": 1 << 30}}


def is_summary(body: dict) -> bool:
    return is_summary_call(body)


def last_block(body: dict) -> dict:
    content = body["messages"][-1]["content"]
    return content[-1] if isinstance(content, list) else {"type": "text", "text": content}


def no_errors(fake: FakeAnthropicServer, frames: list[dict]) -> None:
    assert not [f for f in frames if f["type"] == "error"], [
        (f["code"], f["message"]) for f in frames if f["type"] == "error"
    ]
    for record in fake.requests:
        assert record.prompt_tokens is not None
        assert record.prompt_tokens + record.body["max_tokens"] <= fake.window  # type: ignore[operator]


def results_of(body: dict, name_prefix: str = "") -> list[dict]:
    return [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


async def test_reading_the_archive_in_a_small_window_pages_to_fit_and_the_turn_goes_on(connect, strict_fake):
    fake = strict_fake(WINDOW)
    pages: list[dict] = []

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return text("Earlier: long messages about palimpsests.")
        block = last_block(body)
        if block.get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        if block.get("type") == "tool_result" and not block.get("is_error"):
            page = json.loads(block["content"])
            if "next_offset" in page:
                pages.append(page)
                if page["next_offset"] is not None and len(pages) < 6:
                    return tool_use("session_archive_read", {"offset": page["next_offset"]})
                return text(f"read {len(pages)} pages")
        if block.get("text", "").startswith("read the archive"):
            return tool_use("session_archive_read", {})
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, context_window=WINDOW, compact_threshold=0.8, settings=NO_OFFLOAD)
    compacted = False
    for index in range(8):
        frames = await chat(client, f"message {index}: {FILLER}")
        compacted = compacted or any(f["type"] == "compaction.completed" for f in frames)
        if compacted:
            break
    assert compacted
    frames = await chat(client, "read the archive from the start")
    no_errors(fake, frames)
    assert frames[-1]["stop_reason"] == "end_turn"
    assert not [f for f in frames if f["type"] == "tool.result" and f["is_error"]]
    # Each page holds what fits (fewer than the default 20, or a clipped message), and says
    # where to read on; the model read on with next_offset.
    assert len(pages) >= 2
    assert pages[0]["offset"] == 0 and pages[1]["offset"] == pages[0]["next_offset"]
    assert all(p["next_offset"] is None or p["next_offset"] > p["offset"] for p in pages)
    assert any(OMITTED_MARKER.format(omitted="")[:6] in m["text"] for p in pages for m in p["messages"]) or (
        len(pages[0]["messages"]) < 20
    )


def test_a_page_holds_what_its_room_holds_and_clips_a_single_oversized_message():
    messages = [{"position": i, "role": "user", "text": f"[user] {i} " + "word " * 400} for i in range(5)]
    one = estimate_json_tokens(messages[0])
    page = page_fit(messages, one * 2 + 100)
    assert [m["position"] for m in page] == [0, 1]
    assert page_fit(messages, None) == messages
    clipped = page_fit(messages, one // 3)
    assert len(clipped) == 1 and "characters omitted ..." in clipped[0]["text"]
    assert estimate_json_tokens(clipped[0]) <= one // 3
    assert clipped[0]["text"].startswith("[user] 0 word") and clipped[0]["text"].endswith("word ")


def test_a_server_result_over_its_room_becomes_an_error_saying_its_size_and_the_room():
    big = ToolOutcome("a", "fs_read", "x " * 3000, "x " * 3000, False)
    small = ToolOutcome("b", "fs_read", "ok", "ok", False)
    client = ToolOutcome("c", "client_lookup", "y " * 3000, "y " * 3000, False)
    fitted = results_fit([small, big, client], {"a", "b"}, 1000)
    assert fitted[0] is small and fitted[2] is client  # a client's result is not the server's to refuse
    assert fitted[1].is_error and fitted[1].raw is None
    # Its size, and its room: its share and what the small result before it left unused.
    assert "is about 3001 tokens" in fitted[1].content and "room for about 1998 tokens" in fitted[1].content
    # What an earlier result leaves unused goes to the later ones.
    assert not results_fit([small, ToolOutcome("a", "t", "z " * 1500, "z " * 1500, False)], {"a"}, 1000)[
        1
    ].is_error


@pytest.fixture
def fill_tool(settings: Any) -> list[int | None]:
    """A server tool whose result fills its whole room; the rooms it was given."""
    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "tests.features.FILL_FEATURE"]
    FILL_ROOMS.clear()
    return FILL_ROOMS


async def test_the_warning_is_given_before_a_threshold_compaction_even_after_a_step_that_fills_its_room(
    connect, strict_fake, fill_tool
):
    fake = strict_fake(WINDOW)
    warned: list[dict] = []

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return text("Earlier: long messages about palimpsests.")
        block = last_block(body)
        if block.get("text") == PRE_COMPACTION_WARNING:
            warned.append(body)
            return text("Notepad is up to date.")
        if block.get("type") == "tool_result":
            return text("filled")
        if block.get("text", "").startswith("fill"):
            return tool_use("test_fill", {})
        return text("ok")

    fake.default_reply = model
    client = await connect()
    # A threshold near the window: the step's result lands far past it in one go.
    await client.create(model=MODEL, context_window=WINDOW, compact_threshold=0.95, settings=NO_OFFLOAD)
    for index in range(2):
        await chat(client, f"message {index}: {FILLER}")
    frames = await chat(client, "fill the context")
    no_errors(fake, frames)
    assert fill_tool and fill_tool[0] is not None and fill_tool[0] > 500
    types = [f["type"] for f in frames]
    # The result filled all the room it was given, and the warning step still fit after it.
    assert "compaction.warning" in types and types.index("compaction.warning") < types.index(
        "compaction.completed"
    )
    assert warned and any(b.get("type") == "tool_result" for m in warned[0]["messages"] for b in m["content"])
    assert frames[-1]["stop_reason"] == "end_turn"
    assert [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"] == "filled"


async def test_an_operators_compaction_gives_the_warning_step_first_and_stores_its_answer(
    connect, strict_fake
):
    fake = strict_fake(WINDOW)

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return text("Earlier: two messages.")
        block = last_block(body)
        if block.get("text") == PRE_COMPACTION_WARNING:
            return tool_use("update_notepad", {"operation": "append", "content": "kept before compaction"})
        return text("ok")

    fake.default_reply = model
    client = await connect()
    session = await client.create(model=MODEL, context_window=WINDOW)
    for index in range(2):
        await chat(client, f"message {index}: {FILLER[:400]}")
    await compaction_operator_start(session_id=session["id"])
    await runner.turns_wait_idle(timeout=30)
    bodies = [r.body for r in fake.requests]
    warning_at = next(i for i, b in enumerate(bodies) if last_block(b).get("text") == PRE_COMPACTION_WARNING)
    summary_at = next(i for i, b in enumerate(bodies) if is_summary(b))
    assert warning_at < summary_at
    row = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    assert row.epoch == 1 and "kept before compaction" in (row.notepad or "")
    # The warning step's answer is stored (in the archived epoch), its tool call run.
    answer = await sync_to_async(
        Message.objects.filter(session_id=session["id"], epoch=0, role="assistant").last
    )()
    assert (
        answer is not None and answer.content is not None and answer.content[-1]["name"] == "update_notepad"
    )
    archive = await sync_to_async(Archive.objects.get)(session_id=session["id"])
    assert archive.trigger == "operator"
    for record in fake.requests:
        assert record.prompt_tokens + record.body["max_tokens"] <= WINDOW  # type: ignore[operator]
