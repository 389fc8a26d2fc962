"""The notepad and scratchpad editors: saves go through the services, and a stale editor never
overwrites what the agent wrote meanwhile."""

from __future__ import annotations

import pytest

from memory_app.notepad import selectors as memory_selectors
from memory_app.notepad import services as memory_services
from memory_app.notepad.models import NotepadRevision
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadRevision
from memory_app.scratchpad.selectors import scratchpad_get
from sessions_app.models import SessionEvent
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db


def agent_writes_notepad(session, content: str) -> None:
    memory_services.notepad_write(session_id=session.pk, content=content, author="agent")


# ---------------------------------------------------------------------------
# Notepad
# ---------------------------------------------------------------------------
def test_editor_opens_with_the_current_text_and_version(operator_client):
    session = session_new()
    agent_writes_notepad(session, "- [ ] totals\n")
    html = operator_client.get(f"/sessions/{session.pk}/notepad/edit/").content.decode()
    assert "- [ ] totals" in html and 'name="base_version" value="1"' in html


def test_saving_writes_a_revision_and_an_event_as_the_operator(
    operator_client, django_capture_on_commit_callbacks
):
    session = session_new()
    with django_capture_on_commit_callbacks(execute=False) as announced:
        response = operator_client.post(
            f"/sessions/{session.pk}/notepad/edit/", {"content": "line one\r\nline two", "base_version": "0"}
        )
    assert response.status_code == 200 and "Saved as version 1" in response.content.decode()
    revision = NotepadRevision.objects.get(session=session)
    assert (revision.author, revision.content) == ("operator:op", "line one\nline two")
    event = SessionEvent.objects.get(session=session, type="notepad.updated")
    assert event.payload == {"content": "line one\nline two", "version": 1, "author": "operator:op"}
    assert len(announced) == 1


def test_saved_response_refreshes_the_preview_and_revisions(operator_client):
    session = session_new()
    html = operator_client.post(
        f"/sessions/{session.pk}/notepad/edit/", {"content": "**bold**", "base_version": "0"}
    ).content.decode()
    assert (
        'id="notepad-view" class="notepad-view" hx-swap-oob="true"' in html
        and "<strong>bold</strong>" in html
    )
    assert 'id="notepad-revisions" class="revisions" hx-swap-oob="true"' in html


def test_save_after_the_agent_wrote_shows_both_texts_and_overwrites_nothing(operator_client):
    session = session_new()
    agent_writes_notepad(session, "agent v1")
    agent_writes_notepad(session, "agent v2 <b>")
    response = operator_client.post(
        f"/sessions/{session.pk}/notepad/edit/", {"content": "operator text", "base_version": "1"}
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert "Not saved: the notepad changed while you were editing" in html
    assert '<pre class="conflict-current">agent v2 &lt;b&gt;</pre>' in html
    assert ">\noperator text</textarea>" in html
    assert 'name="base_version" value="2"' in html
    assert memory_selectors.notepad_get(session_id=session.pk).content == "agent v2 <b>"
    assert NotepadRevision.objects.filter(session=session).count() == 2


def test_saving_again_after_a_conflict_replaces_the_notepad_on_purpose(operator_client):
    session = session_new()
    agent_writes_notepad(session, "agent v1")
    agent_writes_notepad(session, "agent v2")
    operator_client.post(f"/sessions/{session.pk}/notepad/edit/", {"content": "mine", "base_version": "1"})
    response = operator_client.post(
        f"/sessions/{session.pk}/notepad/edit/", {"content": "merged", "base_version": "2"}
    )
    assert response.status_code == 200
    assert memory_selectors.notepad_get(session_id=session.pk) == memory_selectors.NotepadState("merged", 3)


def test_notepad_over_its_limit_is_refused_with_the_reason(operator_client):
    session = session_new()
    content = "x" * (memory_services.NOTEPAD_MAX_CHARS + 1)
    response = operator_client.post(
        f"/sessions/{session.pk}/notepad/edit/", {"content": content, "base_version": "0"}
    )
    assert response.status_code == 422 and "over its limit" in response.content.decode()
    assert not NotepadRevision.objects.exists()


def test_a_revision_shows_the_notepad_as_that_version_left_it(operator_client):
    session = session_new()
    agent_writes_notepad(session, "first")
    agent_writes_notepad(session, "second")
    html = operator_client.get(f"/sessions/{session.pk}/notepad/versions/1/").content.decode()
    assert "first" in html and "second" not in html
    assert operator_client.get(f"/sessions/{session.pk}/notepad/versions/9/").status_code == 404


def test_revision_history_lists_who_changed_the_notepad(operator_client):
    session = session_new()
    agent_writes_notepad(session, "a")
    operator_client.post(f"/sessions/{session.pk}/notepad/edit/", {"content": "b", "base_version": "1"})
    html = operator_client.get(f"/sessions/{session.pk}/notepad/").content.decode()
    revisions = html.split('id="notepad-revisions"', 1)[1]
    assert revisions.index("operator:op") < revisions.index(">agent<")  # newest first


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
def test_operator_sets_a_space_through_the_service(operator_client):
    session = session_new()
    response = operator_client.post(
        f"/sessions/{session.pk}/scratchpad/plan/edit/",
        {"space": "plan", "value": "1. a\r\n2. b", "base_version": "0"},
    )
    assert response.status_code == 200
    assert scratchpad_get(session_id=session.pk).plan == "1. a\n2. b"
    revision = ScratchpadRevision.objects.get(session=session)
    assert (revision.author, revision.action, revision.version) == ("operator:op", "set", 1)
    assert SessionEvent.objects.filter(session=session, type="scratchpad.updated").count() == 1


def test_refs_are_edited_one_a_line(operator_client):
    session = session_new()
    operator_client.post(
        f"/sessions/{session.pk}/scratchpad/refs/edit/",
        {"space": "refs", "value": "src/a.py\n\n https://x.test/1 \n", "base_version": "0"},
    )
    assert scratchpad_get(session_id=session.pk).refs == ["src/a.py", "https://x.test/1"]


def test_space_changed_by_the_agent_meanwhile_is_a_visible_conflict(operator_client):
    session = session_new()
    scratchpad_services.scratchpad_apply(
        session_id=session.pk,
        action="set_notes",
        args={"content": "agent notes"},
        author="agent",
        limits=scratchpad_services.ScratchpadLimits.from_settings(session.settings),
    )
    response = operator_client.post(
        f"/sessions/{session.pk}/scratchpad/notes/edit/",
        {"space": "notes", "value": "mine", "base_version": "0"},
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert "Not saved: the notes changed while you were editing" in html
    assert '<pre class="conflict-current">agent notes</pre>' in html and ">\nmine</textarea>" in html
    assert scratchpad_get(session_id=session.pk).notes == "agent notes"


def test_value_over_the_sessions_limit_is_refused(operator_client):
    session = session_new(settings={"scratchpad": {"plan_max_chars": 5}})
    response = operator_client.post(
        f"/sessions/{session.pk}/scratchpad/plan/edit/",
        {"space": "plan", "value": "too long", "base_version": "0"},
    )
    assert response.status_code == 422 and "this session allows 5" in response.content.decode()
    assert scratchpad_get(session_id=session.pk).plan == ""


def test_unknown_space_is_404(operator_client):
    session = session_new()
    assert operator_client.get(f"/sessions/{session.pk}/scratchpad/secrets/edit/").status_code == 404
