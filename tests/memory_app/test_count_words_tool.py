"""`count_words` (memory_app/count_words/), the notepad sandbox API's example: progress notes in the
notepad during a long count, its result, and where it is offered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_app.count_words import tools as count_words
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.notepad_support import notepad_last_section, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_scratchpad")]


# -- progress notes during a long operation ---------------------------------------------------------
@pytest.fixture
def small_chunks(monkeypatch: Any) -> None:
    monkeypatch.setattr(count_words, "COUNT_WORDS_MIN_CHUNK_LINES", 1)


async def count_turn(connect: Any, fake: FakeAnthropicServer, words_text: str, **create: Any) -> list[dict]:
    client = await connect()
    await client.create(**create)
    fake.enqueue(tool_use("count_words", {"text": words_text}), text("done"))
    return await turn(client)


async def test_count_words_appends_a_progress_note_per_chunk_that_the_model_sees(
    connect: Any, fake_anthropic: FakeAnthropicServer, small_chunks: None
) -> None:
    await count_turn(connect, fake_anthropic, "The cat\nthe dog\nA cat's toy")
    assert notepad_last_section(fake_anthropic.requests[1].body) == (
        "## Session Notepad\n"
        "count_words: processed 1/3 (1 lines, 2 words so far)\n"
        "count_words: processed 2/3 (2 lines, 4 words so far)\n"
        "count_words: processed 3/3 (3 lines, 7 words so far)\n"
    )


async def test_count_words_notes_land_one_by_one_as_events(
    connect: Any, fake_anthropic: FakeAnthropicServer, small_chunks: None
) -> None:
    frames = await count_turn(connect, fake_anthropic, "a\nb\nc")
    updates = [
        (f["version"], f["content"].count("\n"), f["author"])
        for f in frames
        if f["type"] == "notepad.updated"
    ]
    assert updates == [(1, 1, "agent"), (2, 2, "agent"), (3, 3, "agent")]


async def test_count_words_notes_come_before_its_result(
    connect: Any, fake_anthropic: FakeAnthropicServer, small_chunks: None
) -> None:
    frames = await count_turn(connect, fake_anthropic, "a\nb")
    types = [f["type"] for f in frames if f["type"] in ("notepad.updated", "tool.result")]
    assert types == ["notepad.updated", "notepad.updated", "tool.result"]


async def test_count_words_returns_the_counts(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    await count_turn(connect, fake_anthropic, "The cat\nthe dog\nA cat's toy")
    result = fake_anthropic.requests[1].body["messages"][-1]["content"][0]
    assert json.loads(result["content"]) == {
        "lines": 3,
        "words": 7,
        "characters": 27,
        "top_words": [["the", 2], ["cat", 1], ["dog", 1], ["a", 1], ["cat's", 1], ["toy", 1]],
    }


async def test_count_words_adds_at_most_the_maximum_number_of_notes(
    connect: Any, fake_anthropic: FakeAnthropicServer, small_chunks: None
) -> None:
    frames = await count_turn(connect, fake_anthropic, "\n".join(f"word{i}" for i in range(25)))
    notes = [f for f in frames if f["type"] == "notepad.updated"][-1]["content"].splitlines()
    assert (len(notes), notes[-1]) == (9, "count_words: processed 9/9 (25 lines, 25 words so far)")
    assert len(notes) <= count_words.COUNT_WORDS_MAX_PROGRESS_NOTES


async def test_count_words_is_offered_only_with_the_notepad(
    connect: Any, fake_anthropic: FakeAnthropicServer, small_chunks: None
) -> None:
    frames = await count_turn(connect, fake_anthropic, "a b\nc", settings={"notepad": {"enabled": False}})
    assert "count_words" not in [t["name"] for t in fake_anthropic.requests[0].body.get("tools", [])]
    result = fake_anthropic.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and "Unknown tool 'count_words'" in result["content"]
    assert [f for f in frames if f["type"] == "notepad.updated"] == []


async def test_count_words_without_text_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create()
    fake_anthropic.enqueue(tool_use("count_words", {}), text("done"))
    await turn(client)
    result = fake_anthropic.requests[1].body["messages"][-1]["content"][0]
    assert (result["is_error"], result["content"]) == (
        True,
        'count_words needs "text": a string. Nothing was done; correct the call and make it again.',
    )
