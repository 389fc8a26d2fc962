"""The notepad services: storage, every operation, every refusal, versions, revisions, events."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from memory_app.notepad import services
from memory_app.notepad.services import NotepadConflict, NotepadEditError
from sessions_app import announce
from sessions_app.authors import AGENT_AUTHOR
from tests.memory_app.notepad_support import notepad_events, notepad_row, revisions, session_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_scratchpad")]

AGENT = AGENT_AUTHOR


def write(session: Any, content: str, **kwargs: Any) -> Any:
    return services.notepad_write(
        session_id=session.id, content=content, author=kwargs.pop("author", AGENT), **kwargs
    )


def update(session: Any, operation: str, **kwargs: Any) -> Any:
    return services.notepad_update(
        session_id=session.id, operation=operation, author=kwargs.pop("author", AGENT), **kwargs
    )


# -- storage -----------------------------------------------------------------
def test_notepad_is_null_until_first_written() -> None:
    session = session_make()
    assert notepad_row(session) == (None, 0)


def test_write_stores_the_content_on_the_session() -> None:
    session = session_make()
    write(session, "## Plan\n- [ ] survey\n")
    assert notepad_row(session) == ("## Plan\n- [ ] survey\n", 1)


def test_write_replaces_everything() -> None:
    session = session_make()
    write(session, "old notes")
    write(session, "new notes")
    assert notepad_row(session) == ("new notes", 2)


def test_write_of_empty_string_clears_the_notepad() -> None:
    session = session_make()
    write(session, "notes")
    write(session, "")
    assert notepad_row(session) == ("", 2)


def test_every_change_is_a_revision_with_author_operation_and_content_after() -> None:
    session = session_make()
    write(session, "a\n")
    update(session, "append", content="b\n", author="operator:alice")
    update(session, "find_replace", find="a", replace="A")
    assert revisions(session) == [
        (1, "agent", "write", "a\n"),
        (2, "operator:alice", "append", "a\nb\n"),
        (3, "agent", "find_replace", "A\nb\n"),
    ]


# -- operations ----------------------------------------------------------------
def test_find_replace_changes_the_first_occurrence_only() -> None:
    session = session_make()
    write(session, "- [ ] a\n- [ ] b\n")
    update(session, "find_replace", find="- [ ]", replace="- [x]")
    assert notepad_row(session)[0] == "- [x] a\n- [ ] b\n"


def test_find_replace_with_replace_all_changes_every_occurrence() -> None:
    session = session_make()
    write(session, "- [ ] a\n- [ ] b\n")
    update(session, "find_replace", find="- [ ]", replace="- [x]", replace_all=True)
    assert notepad_row(session)[0] == "- [x] a\n- [x] b\n"


def test_find_replace_with_empty_replacement_removes_the_found_text() -> None:
    session = session_make()
    write(session, "keep drop keep")
    update(session, "find_replace", find=" drop", replace="")
    assert notepad_row(session)[0] == "keep keep"


def test_append_adds_the_content_exactly_as_given() -> None:
    session = session_make()
    write(session, "line one")
    update(session, "append", content="line two")
    assert notepad_row(session)[0] == "line oneline two"


def test_append_to_a_null_notepad_starts_it() -> None:
    session = session_make()
    update(session, "append", content="first\n")
    assert notepad_row(session) == ("first\n", 1)


def test_prepend_adds_the_content_exactly_as_given() -> None:
    session = session_make()
    write(session, "body\n")
    update(session, "prepend", content="# Title\n")
    assert notepad_row(session)[0] == "# Title\nbody\n"


def test_delete_removes_every_occurrence_of_the_content() -> None:
    session = session_make()
    write(session, "a\nobsolete\nb\nobsolete\n")
    update(session, "delete", content="obsolete\n")
    assert notepad_row(session)[0] == "a\nb\n"


# -- refusals: nothing changes -----------------------------------------------------
REFUSED_EDITS = [
    pytest.param({"operation": "find_replace", "replace": "x"}, 'needs "find"', id="find_missing"),
    pytest.param(
        {"operation": "find_replace", "find": "", "replace": "x"}, "must not be empty", id="find_empty"
    ),
    pytest.param({"operation": "find_replace", "find": "notes"}, 'needs "replace"', id="replace_missing"),
    pytest.param(
        {"operation": "find_replace", "find": "absent", "replace": "x"}, "does not occur", id="not_found"
    ),
    pytest.param(
        {"operation": "find_replace", "find": "NOTES", "replace": "x"}, "does not occur", id="case_differs"
    ),
    pytest.param({"operation": "append"}, 'needs "content"', id="append_content_missing"),
    pytest.param({"operation": "append", "content": ""}, "must not be empty", id="append_content_empty"),
    pytest.param({"operation": "prepend"}, 'needs "content"', id="prepend_content_missing"),
    pytest.param({"operation": "delete"}, 'needs "content"', id="delete_content_missing"),
    pytest.param({"operation": "delete", "content": ""}, "must not be empty", id="delete_content_empty"),
    pytest.param({"operation": "delete", "content": "absent"}, "does not occur", id="delete_not_found"),
    pytest.param(
        {"operation": "rewrite", "content": "x"}, 'Unknown operation "rewrite"', id="unknown_operation"
    ),
]


@pytest.mark.parametrize(("edit", "message"), REFUSED_EDITS)
def test_refused_edit_raises_and_changes_nothing(edit: dict, message: str) -> None:
    session = session_make()
    write(session, "my notes\n")
    operation = edit.pop("operation")
    with pytest.raises(NotepadEditError, match=message):
        update(session, operation, **edit)
    assert notepad_row(session) == ("my notes\n", 1)
    assert len(revisions(session)) == 1
    assert len(notepad_events(session)) == 1


def test_change_over_the_size_limit_is_refused_and_changes_nothing(monkeypatch: Any) -> None:
    monkeypatch.setattr(services, "NOTEPAD_MAX_CHARS", 10)
    session = session_make()
    write(session, "0123456789")
    with pytest.raises(NotepadEditError, match="over its limit of 10"):
        update(session, "append", content="!")
    assert notepad_row(session) == ("0123456789", 1)


# -- versions: optimistic concurrency for operators -------------------------------
def test_edit_naming_the_current_version_applies() -> None:
    session = session_make()
    write(session, "v1")
    write(session, "operator text", author="operator:alice", expected_version=1)
    assert notepad_row(session) == ("operator text", 2)


def test_stale_edit_is_refused_with_the_current_content_and_version() -> None:
    session = session_make()
    write(session, "agent v1")
    write(session, "agent v2")
    with pytest.raises(NotepadConflict) as conflict:
        write(session, "operator text", author="operator:alice", expected_version=1)
    assert (conflict.value.content, conflict.value.version) == ("agent v2", 2)


def test_stale_edit_overwrites_nothing() -> None:
    session = session_make()
    write(session, "agent v1")
    write(session, "agent v2")
    with pytest.raises(NotepadConflict):
        update(session, "append", content="x", author="operator:alice", expected_version=1)
    assert notepad_row(session) == ("agent v2", 2)
    assert len(revisions(session)) == 2


def test_stale_edit_of_a_never_written_notepad_reports_empty_content() -> None:
    session = session_make()
    with pytest.raises(NotepadConflict) as conflict:
        write(session, "x", author="operator:alice", expected_version=3)
    assert (conflict.value.content, conflict.value.version) == ("", 0)


def test_agent_edit_without_a_version_applies_to_the_current_content() -> None:
    session = session_make()
    write(session, "operator line\n", author="operator:alice", expected_version=0)
    update(session, "append", content="agent line\n")
    assert notepad_row(session) == ("operator line\nagent line\n", 2)


# -- events ------------------------------------------------------------------------
def test_change_emits_notepad_updated_with_content_version_and_author() -> None:
    session = session_make()
    write(session, "a")
    update(session, "append", content="b", author="operator:alice")
    assert notepad_events(session) == [
        {"content": "a", "version": 1, "author": "agent"},
        {"content": "ab", "version": 2, "author": "operator:alice"},
    ]


def test_notepad_updated_is_announced_only_when_the_transaction_commits(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    announced: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: announced.extend)
    session = session_make()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        write(session, "notes")
        assert announced == []
    for callback in callbacks:
        callback()
    assert [(f["type"], f["content"], f["version"], f["author"]) for f in announced] == [
        ("notepad.updated", "notes", 1, "agent")
    ]


def test_change_rolled_back_with_its_transaction_leaves_no_trace(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    announced: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: announced.extend)
    session = session_make()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        write(session, "notes")
        raise RuntimeError("the caller failed after the write")
    assert notepad_row(session) == (None, 0)
    assert revisions(session) == []
    assert announced == []


def test_refused_edit_announces_nothing(monkeypatch: Any, django_capture_on_commit_callbacks: Any) -> None:
    announced: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: announced.extend)
    session = session_make()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(NotepadEditError):
        update(session, "delete", content="absent")
    assert announced == []
