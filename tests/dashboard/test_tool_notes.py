"""An authored tool's progress notes in the transcript: the notepad edits a call made while it ran
(`notepad.updated` naming the call) are listed under the call, on the page and as they arrive."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory_app.notepad import services as notepad_services
from sessions_app import selectors as session_selectors
from sessions_app.dashboard.fragments import session_fragments
from sessions_app.dashboard.transcript import call_notes_target
from tests.dashboard.conftest import message_store, session_new

pytestmark = pytest.mark.django_db

CALL = "toolu_progress1"


def call_of(session, name: str = "crunch", tool_use_id: str = CALL) -> None:
    message_store(session, "user", [{"type": "text", "text": "crunch the numbers"}])
    message_store(
        session,
        "assistant",
        [{"type": "tool_use", "id": tool_use_id, "name": name, "input": {"n": 3}}],
    )


def note(session, text: str, tool_use_id: str | None = CALL) -> None:
    notepad_services.notepad_update(
        session_id=session.pk, operation="append", content=text, author="agent", tool_use_id=tool_use_id
    )


def test_the_notes_a_call_made_are_listed_under_it_in_order_and_escaped(operator_client):
    session = session_new()
    call_of(session)
    note(session, "step 1 of 3 <done>\n")
    note(session, "step 2 of 3\n")
    note(session, "not this call's\n", tool_use_id=None)  # an edit of no call
    notepad_services.notepad_write(session_id=session.pk, content="all new", author="agent", tool_use_id=CALL)
    html = operator_client.get(reverse("dashboard:session", args=[session.pk])).content.decode()
    listed = html.split(f'id="{call_notes_target(CALL)}"', 1)[1].split("</ol>", 1)[0]
    assert (
        listed.index("step 1 of 3 &lt;done&gt;")
        < listed.index("step 2 of 3")
        < listed.index("(rewrote the notepad)")
    )
    assert "not this call" not in listed and "<done>" not in html


def test_a_call_of_a_built_in_tool_is_not_looked_up(operator_client):
    session = session_new()
    call_of(session, name="update_notepad")
    note(session, "made by hand with the call's id\n")
    html = operator_client.get(reverse("dashboard:session", args=[session.pk])).content.decode()
    listed = html.split(f'id="{call_notes_target(CALL)}"', 1)[1].split("</ol>", 1)[0]
    assert listed.endswith('aria-label="Notepad notes of update_notepad">')  # no note listed


def test_a_note_arrives_under_its_call_live():
    session = session_new()
    call_of(session)
    note(session, "halfway <there>\n")
    events = session_selectors.session_events_after(session_id=session.pk, after_seq=0)
    html = session_fragments(session_id=session.pk, events=events, operator="op")
    assert f'hx-swap-oob="beforeend:#{call_notes_target(CALL)}"' in html
    assert "halfway &lt;there&gt;" in html and "<there>" not in html


def test_a_model_made_call_id_becomes_a_safe_element_id():
    assert call_notes_target('to"ol <x>') == "tool-notes-to_ol__x_"
