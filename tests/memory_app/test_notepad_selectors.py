"""Reading the notepad now and as it was (what the dashboard's history view needs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_app.notepad import selectors, services
from memory_app.notepad.models import NotepadRevision
from memory_app.notepad.selectors import NotepadState
from sessions_app.engine.features import features
from sessions_app.models import AgentSession
from tests.memory_app.notepad_support import session_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_scratchpad")]

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def write_at(session: AgentSession, content: str, minute: int) -> None:
    revision = services.notepad_write(session_id=session.id, content=content, author="agent")
    NotepadRevision.objects.filter(pk=revision.pk).update(created_at=T0 + timedelta(minutes=minute))


def test_notepad_get_of_a_never_written_notepad_is_empty_at_version_zero() -> None:
    session = session_make()
    assert selectors.notepad_get(session_id=session.id) == NotepadState(content="", version=0)


def test_notepad_get_returns_the_current_content_and_version() -> None:
    session = session_make()
    write_at(session, "a", 0)
    write_at(session, "b", 1)
    assert selectors.notepad_get(session_id=session.id) == NotepadState(content="b", version=2)


def test_notepad_as_of_a_moment_between_changes_is_the_earlier_content() -> None:
    session = session_make()
    write_at(session, "a", 0)
    write_at(session, "b", 10)
    moment = T0 + timedelta(minutes=5)
    assert selectors.notepad_as_of(session_id=session.id, moment=moment) == NotepadState(
        content="a", version=1
    )


def test_notepad_as_of_a_moment_before_the_first_change_is_empty() -> None:
    session = session_make()
    write_at(session, "a", 10)
    moment = T0 + timedelta(minutes=5)
    assert selectors.notepad_as_of(session_id=session.id, moment=moment) == NotepadState(
        content="", version=0
    )


def test_notepad_at_version_is_the_content_that_version_left() -> None:
    session = session_make()
    write_at(session, "a", 0)
    write_at(session, "b", 1)
    assert selectors.notepad_at_version(session_id=session.id, version=1) == NotepadState(
        content="a", version=1
    )


def test_notepad_at_version_zero_is_empty() -> None:
    session = session_make()
    assert selectors.notepad_at_version(session_id=session.id, version=0) == NotepadState(
        content="", version=0
    )


def test_notepad_revisions_lists_every_change_oldest_first() -> None:
    session = session_make()
    write_at(session, "a", 0)
    write_at(session, "b", 1)
    assert [(r.version, r.content) for r in selectors.notepad_revisions(session_id=session.id)] == [
        (1, "a"),
        (2, "b"),
    ]


def test_the_section_shows_the_notepad_read_with_the_sessions_row_without_reading_it_again(
    django_assert_num_queries,
) -> None:
    """Every request shows the notepad: the engine's snapshot, made from the row it has just
    read, carries it, so the section reads nothing; any other snapshot (a row kept by a view, or
    read without the notepad) has the section read it."""
    from memory_app.notepad.context import NOTEPAD_SECTION

    session = session_make()
    write_at(session, "the plan", 0)
    snapshot = features().snapshot(AgentSession.objects.get(pk=session.id), with_notepad=True)
    assert snapshot.notepad == "the plan"
    with django_assert_num_queries(0):
        shown = NOTEPAD_SECTION.pinned_system(snapshot)  # position `epoch`, the default
    assert shown == ["## Session Notepad\nthe plan"]
    partial = features().snapshot(AgentSession.objects.defer("notepad").get(pk=session.id), with_notepad=True)
    kept = features().snapshot(session)  # the row as made, before the write
    for other in (partial, kept):
        assert other.notepad is None
        with django_assert_num_queries(1):
            assert NOTEPAD_SECTION.pinned_system(other) == shown
