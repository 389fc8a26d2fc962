"""The notepad's sandbox API for server tools, and `count_words`, the built-in tool using it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad import services
from memory_app.notepad.sandbox_api import SessionNotepad, notepad_of
from sessions_app.builtin_tools import count_words
from sessions_app.engine.contract import ToolContext, ToolError
from tests import features as test_features
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.notepad_support import notepad_events, revisions, session_make, system_texts, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_scratchpad")]


@pytest.fixture
def probe(settings: Any) -> Iterator[list[ToolContext]]:
    """A server tool `probe_sandbox` (a test feature) that records the context it was handed."""
    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "tests.features.PROBE_FEATURE"]
    test_features.PROBED.clear()
    yield test_features.PROBED
    test_features.PROBED.clear()


# -- handed to every server tool ---------------------------------------------------------------
async def test_server_tool_is_handed_the_sessions_notepad(connect: Any, probe: list[ToolContext]) -> None:
    client = await connect()
    session = await client.create()
    await turn(client, "tool probe_sandbox {}")
    notepad = notepad_of(probe[0])
    assert isinstance(notepad, SessionNotepad) and notepad.session_id == uuid.UUID(session["id"])


async def test_server_tool_gets_no_notepad_where_it_is_switched_off(
    connect: Any, probe: list[ToolContext]
) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"enabled": False}})
    await turn(client, "tool probe_sandbox {}")
    assert "notepad" not in probe[0].sandbox


# -- read / write / append -----------------------------------------------------------------------
async def test_sandbox_read_of_a_never_written_notepad_is_empty() -> None:
    session = await sync_to_async(session_make)()
    assert await SessionNotepad(session_id=session.id).read() == ""


async def test_sandbox_write_replaces_and_read_returns_it() -> None:
    session = await sync_to_async(session_make)()
    notepad = SessionNotepad(session_id=session.id)
    await notepad.write("first")
    await notepad.write("second")
    assert await notepad.read() == "second"


async def test_sandbox_append_adds_text_as_given() -> None:
    session = await sync_to_async(session_make)()
    notepad = SessionNotepad(session_id=session.id)
    await notepad.write("a")
    await notepad.append("b")
    assert await notepad.read() == "ab"


async def test_sandbox_edits_are_the_agents_revisions_and_events() -> None:
    session = await sync_to_async(session_make)()
    notepad = SessionNotepad(session_id=session.id)
    await notepad.write("a")
    await notepad.append("b")
    assert await sync_to_async(revisions)(session) == [
        (1, "agent", "write", "a"),
        (2, "agent", "append", "ab"),
    ]
    assert await sync_to_async(notepad_events)(session) == [
        {"content": "a", "version": 1, "author": "agent"},
        {"content": "ab", "version": 2, "author": "agent"},
    ]


async def test_sandbox_append_that_cannot_apply_raises_a_tool_error(monkeypatch: Any) -> None:
    monkeypatch.setattr(services, "NOTEPAD_MAX_CHARS", 3)
    session = await sync_to_async(session_make)()
    notepad = SessionNotepad(session_id=session.id)
    await notepad.write("abc")
    with pytest.raises(ToolError, match="over its limit of 3"):
        await notepad.append("d")


async def test_sandbox_write_of_a_non_string_is_a_type_error() -> None:
    session = await sync_to_async(session_make)()
    with pytest.raises(TypeError):
        await SessionNotepad(session_id=session.id).write(42)  # type: ignore[arg-type]


# -- count_words: progress notes during a long operation ---------------------------------------------
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
    assert system_texts(fake_anthropic.requests[1].body)[-1] == (
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
        'count_words needs "text": the text to count, as a string.',
    )
