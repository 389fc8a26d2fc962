"""The memory history pages: every change of the notepad and of each scratchpad space, line diffs,
restoring a version through the same services (and their conflict rule), and the archive
stepper's links to the memory as it was."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad import services as notepad_services
from memory_app.notepad.dashboard.selectors import notepad_history
from memory_app.notepad.models import NotepadRevision
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadRevision
from memory_app.scratchpad.selectors import scratchpad_get
from memory_app.scratchpad.services import ScratchpadLimits
from sessions_app.dashboard import selectors
from sessions_app.models import SessionEvent
from tests.dashboard.conftest import session_new
from tests.dashboard.test_panels import compacted_session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def agent_writes(session, content: str) -> None:
    notepad_services.notepad_write(session_id=session.pk, content=content, author="agent")


def agent_sets(session, action: str, **args) -> None:
    scratchpad_services.scratchpad_apply(
        session_id=session.pk,
        action=action,
        args=args,
        author="agent",
        limits=ScratchpadLimits.from_settings(session.settings),
    )


def history(client, session, query: str = "", space: str | None = None):
    where = f"scratchpad/{space}" if space else "notepad"
    return client.get(f"/sessions/{session.pk}/{where}/history/{query}")


# ---------------------------------------------------------------------------
# The line diff
# ---------------------------------------------------------------------------
def test_diff_marks_added_and_removed_lines_with_their_numbers():
    diff = selectors.line_diff("one\ntwo\nthree\n", "one\n2\nthree\nfour\n")
    kinds = [(line.kind, line.text, line.old_number, line.new_number) for line in diff.lines]
    assert kinds == [
        ("same", "one", 1, 1),
        ("removed", "two", 2, None),
        ("added", "2", None, 2),
        ("same", "three", 3, 3),
        ("added", "four", None, 4),
    ]
    assert (diff.added, diff.removed) == (2, 1)


def test_diff_leaves_out_unchanged_lines_far_from_a_change():
    before = "\n".join(f"line {i}" for i in range(1, 41))
    after = before.replace("line 20", "line twenty")
    diff = selectors.line_diff(before, after)
    texts = [line.text for line in diff.lines]
    assert texts[0] == "@@ -17 +17 @@" and diff.lines[0].kind == "gap"
    assert "line 16" not in texts and "line 24" not in texts
    assert texts[1:] == [
        "line 17",
        "line 18",
        "line 19",
        "line 20",
        "line twenty",
        "line 21",
        "line 22",
        "line 23",
    ]


def test_diff_of_equal_texts_is_unchanged():
    assert selectors.line_diff("same\n", "same\n").unchanged


# ---------------------------------------------------------------------------
# The notepad's history
# ---------------------------------------------------------------------------
def test_history_lists_every_change_with_author_operation_and_time(operator_client):
    session = session_new()
    agent_writes(session, "first\n")
    notepad_services.notepad_update(
        session_id=session.pk, operation="append", content="second\n", author="agent"
    )
    notepad_services.notepad_write(session_id=session.pk, content="by hand\n", author="operator:op")
    html = history(operator_client, session).content.decode()
    entries = re.findall(r'<li data-version="(\d+)"', html)
    assert entries == ["3", "2", "1", "0"]
    item = html.split('<li data-version="2"', 1)[1].split("</li>", 1)[0]
    assert "agent" in item and "append" in item
    stamp = NotepadRevision.objects.get(session=session, version=2).created_at
    assert timezone.localtime(stamp).strftime("%Y-%m-%d %H:%M:%S") in item
    assert "operator:op" in html.split('<li data-version="3"', 1)[1].split("</li>", 1)[0]


def test_history_opens_on_the_latest_change_diffed_against_the_one_before(operator_client):
    session = session_new()
    agent_writes(session, "keep\nold line\n")
    agent_writes(session, "keep\nnew line\n")
    html = history(operator_client, session).content.decode()
    assert "Version 2" in html and "From version 1 to version 2" in html
    assert re.search(r'class="diff-removed">.*?<td class="code">old line</td>', html)
    assert re.search(r'class="diff-added">.*?<td class="code">new line</td>', html)
    assert "Restore this version" not in html  # the latest is the current text


def test_any_version_diffs_against_the_current_text(operator_client):
    session = session_new()
    agent_writes(session, "alpha\n")
    agent_writes(session, "beta\n")
    agent_writes(session, "gamma\n")
    html = history(operator_client, session, "?version=1&against=current").content.decode()
    assert "From version 1 to the current text (version 3)" in html
    assert re.search(r'class="diff-removed">.*?>alpha</td>', html)
    assert re.search(r'class="diff-added">.*?>gamma</td>', html)
    assert "beta" not in html.split('class="diff"', 1)[1].split("</table>", 1)[0]
    assert 'name="base_version" value="3"' in html and "Restore this version" in html


def test_what_the_model_wrote_is_shown_as_text(operator_client):
    session = session_new()
    agent_writes(session, '<img src=x onerror="alert(1)"><script>alert(2)</script>\n')
    html = history(operator_client, session).content.decode()
    assert "<script>alert(2)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_history_comes_a_page_at_a_time():
    session = session_new()
    for index in range(5):
        agent_writes(session, f"text {index}\n")
    first = notepad_history(session_id=session.pk, limit=2)
    assert [e.version for e in first.entries] == [5, 4] and first.older_before == 4
    second = notepad_history(session_id=session.pk, before=first.older_before, limit=2)
    assert [e.version for e in second.entries] == [3, 2] and second.older_before == 2
    last = notepad_history(session_id=session.pk, before=second.older_before, limit=2)
    assert [e.version for e in last.entries] == [1] and last.older_before is None


def test_at_a_moment_shows_the_change_current_then(operator_client):
    session = session_new()
    agent_writes(session, "morning\n")
    agent_writes(session, "noon\n")
    agent_writes(session, "evening\n")
    start = timezone.now() - timedelta(hours=3)
    for version in (1, 2, 3):
        NotepadRevision.objects.filter(session=session, version=version).update(
            created_at=start + timedelta(hours=version - 1)
        )
    moment = (start + timedelta(hours=1, minutes=30)).isoformat()
    html = history(operator_client, session, f"?at={quote(moment)}").content.decode()
    assert (
        "Version 2" in html
        and 'class="selected" aria-current="true"' in html.split('data-version="2"', 1)[1][:60]
    )
    before_first = (start - timedelta(minutes=1)).isoformat()
    assert "Version 0" in history(operator_client, session, f"?at={quote(before_first)}").content.decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?version=abc", "version must be a whole number"),
        ("?version=-1", "version: Ensure this value is greater than or equal to 0."),
        ("?at=yesterday", "at must be a date and time in ISO 8601"),
        ("?against=sideways", "against must be previous or current."),
        ("?before=0", "before: Ensure this value is greater than or equal to 1."),
        ("?version=1&at=2026-01-01T00:00:00%2B00:00", "Give version or at, not both."),
    ],
)
def test_bad_parameters_get_a_clear_message(operator_client, query, message):
    session = session_new()
    agent_writes(session, "text\n")
    response = history(operator_client, session, query)
    assert response.status_code == 400 and message in response.content.decode()


def test_a_version_never_written_is_not_found(operator_client):
    session = session_new()
    agent_writes(session, "text\n")
    assert history(operator_client, session, "?version=7").status_code == 404


def test_an_empty_notepad_has_version_zero_only(operator_client):
    session = session_new()
    html = history(operator_client, session).content.decode()
    assert "Version 0" in html and re.findall(r'<li data-version="(\d+)"', html) == ["0"]


def test_history_needs_an_operator(client):
    session = session_new()
    assert history(client, session).status_code == 302


# ---------------------------------------------------------------------------
# Restore
# ---------------------------------------------------------------------------
def restore(client, session, version: int, space: str | None = None, **data):
    where = f"scratchpad/{space}" if space else "notepad"
    return client.post(f"/sessions/{session.pk}/{where}/history/{version}/restore/", data, headers=HTMX)


def test_restore_writes_the_old_text_as_a_new_version_by_the_operator(
    operator_client, django_capture_on_commit_callbacks
):
    session = session_new()
    agent_writes(session, "the good notes\n")
    agent_writes(session, "the agent garbled them\n")
    with django_capture_on_commit_callbacks(execute=False) as announced:
        response = restore(operator_client, session, 1, base_version="2")
    html = response.content.decode()
    assert response.status_code == 200 and "Restored version 1 as version 3." in html
    revision = NotepadRevision.objects.get(session=session, version=3)
    assert (revision.author, revision.operation, revision.content) == (
        "operator:op",
        "write",
        "the good notes\n",
    )
    assert notepad_selectors.notepad_get(session_id=session.pk).content == "the good notes\n"
    event = SessionEvent.objects.filter(session=session, type="notepad.updated").last()
    assert event is not None and event.payload["author"] == "operator:op" and len(announced) == 1
    assert "Version 3" in html  # the page now shows the new change


def test_restore_after_the_agent_wrote_shows_both_texts_and_changes_nothing(operator_client):
    session = session_new()
    agent_writes(session, "version one\n")
    agent_writes(session, "version two\n")
    agent_writes(session, "the agent wrote this meanwhile\n")  # after the operator's page loaded at v2
    response = restore(operator_client, session, 1, base_version="2")
    html = response.content.decode()
    assert response.status_code == 409
    assert response.headers["HX-Retarget"] == "#restore-editor"
    assert "Not saved: the notepad changed while you were editing" in html
    assert re.search(r'class="conflict-current">the agent wrote this meanwhile', html)
    assert re.search(r"<textarea[^>]*>\nversion one\n</textarea>", html)
    assert 'name="base_version" value="3"' in html and "Replace with my text" in html
    assert NotepadRevision.objects.filter(session=session).count() == 3
    # Saving from the conflict editor replaces the text on purpose, as a new version.
    response = restore(operator_client, session, 1, base_version="3", content="version one\r\nmerged\n")
    assert (
        response.status_code == 200
        and "Saved your text as version 4 (restoring version 1)." in response.content.decode()
    )
    assert notepad_selectors.notepad_get(session_id=session.pk).content == "version one\nmerged\n"


def test_restoring_the_current_version_is_refused(operator_client):
    session = session_new()
    agent_writes(session, "only\n")
    response = restore(operator_client, session, 1, base_version="1")
    assert response.status_code == 422 and "nothing to restore" in response.content.decode()
    assert NotepadRevision.objects.filter(session=session).count() == 1


def test_restoring_version_zero_empties_the_notepad(operator_client):
    session = session_new()
    agent_writes(session, "something\n")
    assert restore(operator_client, session, 0, base_version="1").status_code == 200
    assert notepad_selectors.notepad_get(session_id=session.pk) == notepad_selectors.NotepadState("", 2)


@pytest.mark.parametrize("data", [{}, {"base_version": "x"}, {"base_version": "-1"}])
def test_restore_with_a_bad_base_version_changes_nothing(operator_client, data):
    session = session_new()
    agent_writes(session, "a\n")
    agent_writes(session, "b\n")
    response = restore(operator_client, session, 1, **data)
    assert response.status_code == 422 and "base_version" in response.content.decode()
    assert notepad_selectors.notepad_get(session_id=session.pk).version == 2


def test_restoring_a_version_never_written_is_not_found(operator_client):
    session = session_new()
    assert restore(operator_client, session, 4, base_version="0").status_code == 404


def test_restore_without_htmx_redirects_to_the_new_version(operator_client):
    session = session_new()
    agent_writes(session, "a\n")
    agent_writes(session, "b\n")
    response = operator_client.post(
        f"/sessions/{session.pk}/notepad/history/1/restore/", {"base_version": "2"}
    )
    assert response.status_code == 302 and response.url.endswith("/notepad/history/?version=3")


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
def test_a_space_has_its_own_history_and_diff(operator_client):
    session = session_new()
    agent_sets(session, "refs.add", ref="src/a.py")
    agent_sets(session, "refs.add", ref="src/b.py")
    agent_sets(session, "set_plan", content="1. read\n2. fix")
    html = history(operator_client, session, space="refs").content.decode()
    assert re.findall(r'<li data-version="(\d+)"', html) == ["2", "1", "0"]
    assert "refs.add" in html and "Refs space history" in html
    assert re.search(r'class="diff-added">.*?>src/b.py</td>', html)


def test_restoring_refs_puts_back_the_list(operator_client):
    session = session_new()
    agent_sets(session, "refs.add", ref="src/a.py")
    agent_sets(session, "refs.set", items=["other.md"])
    response = restore(operator_client, session, 1, space="refs", base_version="2")
    assert response.status_code == 200 and "Restored version 1 as version 3." in response.content.decode()
    assert scratchpad_get(session_id=session.pk).refs == ["src/a.py"]
    revision = ScratchpadRevision.objects.get(session=session, space="refs", version=3)
    assert (revision.author, revision.action) == ("operator:op", "set")


def test_restoring_a_space_the_agent_changed_meanwhile_shows_both(operator_client):
    session = session_new()
    agent_sets(session, "set_notes", content="old notes")
    agent_sets(session, "set_notes", content="newer notes")
    agent_sets(session, "append_notes", content="and more")
    response = restore(operator_client, session, 1, space="notes", base_version="2")
    html = response.content.decode()
    assert response.status_code == 409 and "the notes space changed" in html
    assert "newer notes\nand more" in html and re.search(r"<textarea[^>]*>\nold notes</textarea>", html)
    assert scratchpad_get(session_id=session.pk).notes_version == 3


def test_a_restored_value_over_the_sessions_limit_is_refused_with_the_reason(operator_client):
    session = session_new(settings={"scratchpad": {"notes_max_chars": 1000}})
    agent_sets(session, "set_notes", content="x" * 900)
    agent_sets(session, "set_notes", content="short")
    session.settings["scratchpad"]["notes_max_chars"] = 100
    session.save(update_fields=["settings"])
    response = restore(operator_client, session, 1, space="notes", base_version="2")
    assert response.status_code == 422 and "this session allows 100" in response.content.decode()
    assert scratchpad_get(session_id=session.pk).notes == "short"


def test_an_unknown_space_is_not_found(operator_client):
    session = session_new()
    assert history(operator_client, session, space="diary").status_code == 404
    assert restore(operator_client, session, 1, space="diary", base_version="0").status_code == 404


# ---------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------
def test_panels_link_to_the_histories(operator_client):
    session = session_new()
    html = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'href="/sessions/{session.pk}/notepad/history/"' in html
    for space in ("notes", "plan", "refs"):
        assert f'href="/sessions/{session.pk}/scratchpad/{space}/history/"' in html


def test_archive_stepper_links_to_the_memory_as_it_was(operator_client):
    session = compacted_session()  # notepad v1 before archive 0, v2 before archive 1
    agent_writes(session, "notes of today")
    html = operator_client.get(f"/sessions/{session.pk}/archives/?epoch=0").content.decode()
    link = re.search(r'data-memory-at="notepad" href="([^"]+)"', html)
    assert link is not None
    page = operator_client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "Version 1" in page and "notes of epoch 0" in page
    assert "Restore this version" in page and 'name="base_version" value="3"' in page
    refs = re.search(r'data-memory-at="refs" href="([^"]+)"', html)
    assert refs is not None and operator_client.get(refs.group(1)).status_code == 200
