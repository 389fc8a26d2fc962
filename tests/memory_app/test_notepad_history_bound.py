"""The notepad's history and its bounds: a burst of edits (one sandbox run) shares one revision
and one event, another author's change in between keeps its own, and the session's revisions
keep at most `settings.notepad.history_max_chars` of text, newest first, however they were made."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Sum

from memory_app.notepad import selectors, services
from memory_app.notepad.dashboard.selectors import notepad_history
from memory_app.notepad.models import NotepadRevision
from memory_app.notepad.settings import NOTEPAD_MAX_CHARS
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.engine import sessions as engine_sessions
from sessions_app.validation import SpecError
from tests.memory_app.notepad_support import notepad_events, notepad_row, session_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_scratchpad")]

OPERATOR = "operator:alice"


def burst_write(session, burst, content: str) -> None:
    services.notepad_write(session_id=session.id, content=content, author=AGENT_AUTHOR, burst=burst)


def burst_append(session, burst, text: str) -> None:
    services.notepad_update(
        session_id=session.id, operation="append", content=text, author=AGENT_AUTHOR, burst=burst
    )


def rows(session) -> list[tuple[int, str, str, str, bool]]:
    return list(
        NotepadRevision.objects.filter(session=session)
        .order_by("version")
        .values_list("version", "author", "operation", "content", "pruned")
    )


def test_a_bursts_edits_apply_at_once_and_share_one_revision() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    burst_append(session, burst, "a")
    assert notepad_row(session) == ("a", 1)
    burst_append(session, burst, "b")
    burst_append(session, burst, "c")
    assert notepad_row(session) == ("abc", 3)
    assert rows(session) == [(3, "agent", "append", "abc", False)]
    assert notepad_events(session) == []


def test_a_burst_of_mixed_edits_is_a_write_revision() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    burst_write(session, burst, "x")
    burst_append(session, burst, "y")
    assert rows(session) == [(2, "agent", "write", "xy", False)]


def test_the_end_of_a_burst_sends_one_event_with_the_current_text() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    for part in "abcde":
        burst_append(session, burst, part)
    assert services.notepad_burst_announce(session_id=session.id, burst=burst) is True
    assert services.notepad_burst_announce(session_id=session.id, burst=burst) is False
    assert notepad_events(session) == [{"content": "abcde", "version": 5, "author": "agent"}]


def test_an_operators_edit_during_a_burst_keeps_every_version_someone_saw() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    burst_append(session, burst, "a")
    burst_append(session, burst, "b")
    services.notepad_write(session_id=session.id, content="ab!", author=OPERATOR, expected_version=2)
    burst_append(session, burst, "c")
    burst_append(session, burst, "d")
    assert rows(session) == [
        (2, "agent", "append", "ab", False),
        (3, OPERATOR, "write", "ab!", False),
        (5, "agent", "append", "ab!cd", False),
    ]
    # The operator's change was announced at once; the burst's end announces the text now.
    services.notepad_burst_announce(session_id=session.id, burst=burst)
    assert [e["version"] for e in notepad_events(session)] == [3, 5]


def test_a_burst_overtaken_by_another_change_sends_no_stale_event() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    burst_append(session, burst, "a")
    services.notepad_write(session_id=session.id, content="operator's", author=OPERATOR)
    assert services.notepad_burst_announce(session_id=session.id, burst=burst) is False
    assert [e["version"] for e in notepad_events(session)] == [2]


def test_a_refused_edit_leaves_the_burst_and_its_revision_as_they_were() -> None:
    session = session_make()
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    burst_write(session, burst, "kept")
    with pytest.raises(services.NotepadEditError, match="NOTEPAD_MAX_CHARS"):
        burst_write(session, burst, "x" * (NOTEPAD_MAX_CHARS + 1))
    assert burst.version == 1 and rows(session) == [(1, "agent", "write", "kept", False)]


def test_the_history_keeps_at_most_history_max_chars_of_text_newest_first() -> None:
    session = session_make(notepad={"history_max_chars": 250_000})
    for digit in "0123456":
        services.notepad_write(session_id=session.id, content=digit * 99_000, author=AGENT_AUTHOR)
    kept = NotepadRevision.objects.filter(session=session, pruned=False)
    assert list(kept.order_by("version").values_list("version", flat=True)) == [6, 7]
    assert kept.aggregate(total=Sum("chars"))["total"] == 2 * 99_000
    # The pruned rows stay as who-and-when, without their text.
    assert [(v, c, p) for v, _, _, c, p in rows(session)][:5] == [(v, "", True) for v in range(1, 6)]
    assert notepad_row(session) == ("6" * 99_000, 7)


def test_the_newest_revision_is_kept_whole_at_the_smallest_bound() -> None:
    session = session_make(notepad={"history_max_chars": NOTEPAD_MAX_CHARS})
    services.notepad_write(session_id=session.id, content="a" * 60_000, author=AGENT_AUTHOR)
    services.notepad_write(session_id=session.id, content="b" * NOTEPAD_MAX_CHARS, author=AGENT_AUTHOR)
    assert [(v, p) for v, _, _, _, p in rows(session)] == [(1, True), (2, False)]
    assert selectors.notepad_at_version(session_id=session.id, version=2).content == "b" * NOTEPAD_MAX_CHARS


@pytest.mark.parametrize("value", [NOTEPAD_MAX_CHARS - 1, 0, "big", 10**12])
def test_history_max_chars_out_of_range_is_refused(value) -> None:
    with pytest.raises(SpecError):
        engine_sessions.session_create(owner=None, settings={"notepad": {"history_max_chars": value}})


def test_a_pruned_version_is_not_shown_and_the_moment_says_it_is_not_kept() -> None:
    session = session_make(notepad={"history_max_chars": NOTEPAD_MAX_CHARS})
    services.notepad_write(session_id=session.id, content="first " * 10_000, author=AGENT_AUTHOR)
    services.notepad_write(session_id=session.id, content="second " * 10_000, author=AGENT_AUTHOR)
    with pytest.raises(NotepadRevision.DoesNotExist):
        selectors.notepad_at_version(session_id=session.id, version=1)
    first = NotepadRevision.objects.get(session=session, version=1)
    then = selectors.notepad_as_of(session_id=session.id, moment=first.created_at + timedelta(microseconds=1))
    assert (then.version, then.pruned, then.content) == (1, True, "")
    page = notepad_history(session_id=session.id)
    assert [entry.version for entry in page.entries] == [2]


def test_the_history_compares_a_bursts_revision_with_the_one_kept_before_it() -> None:
    session = session_make()
    services.notepad_write(session_id=session.id, content="one\n", author=OPERATOR)
    burst = services.NotepadBurst(author=AGENT_AUTHOR)
    for line in ("two\n", "three\n", "four\n"):
        burst_append(session, burst, line)
    page = notepad_history(session_id=session.id, version=4)
    assert page.compare_version == 1
    assert page.text == "one\ntwo\nthree\nfour\n"
