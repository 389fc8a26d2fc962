"""The notepad's sandbox API for server tools (`count_words`, its example, has its own tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad import services
from memory_app.notepad.sandbox_api import SessionNotepad, notepad_of
from sessions_app.engine.contract import ToolContext, ToolError
from tests import features as test_features
from tests.memory_app.notepad_support import notepad_events, revisions, session_make, turn

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
