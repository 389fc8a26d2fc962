"""Operators edit the notepad in the Django admin through the service, with optimistic concurrency."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memory_app.notepad import services
from memory_app.notepad.models import NotepadRevision
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.engine.features import features
from sessions_app.models import AgentSession
from tests.memory_app.notepad_support import notepad_events, notepad_row, revisions, session_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_scratchpad")]


def change_url(session: AgentSession) -> str:
    return reverse("admin:sessions_app_agentsession_change", args=[session.pk])


def form_data(client: Client, session: AgentSession) -> dict[str, Any]:
    """The change form as the operator's browser would submit it unchanged."""
    form = client.get(change_url(session)).context["adminform"].form
    return {name: form[name].value() for name in form.fields if form[name].value() is not None}


def agent_writes(session: AgentSession, content: str) -> None:
    services.notepad_write(session_id=session.id, content=content, author=AGENT_AUTHOR)


def test_change_page_shows_the_notepad_and_the_version_it_is_at(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    data = form_data(admin_client, session)
    assert (data["notepad_content"], data["notepad_base_version"]) == ("agent notes", 1)


def test_operator_edit_is_saved_as_the_operators_revision(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    data = form_data(admin_client, session) | {"notepad_content": "operator notes"}
    response = admin_client.post(change_url(session), data)
    assert response.status_code == 302
    assert notepad_row(session) == ("operator notes", 2)
    assert revisions(session)[-1] == (2, "operator:admin", "write", "operator notes")


def test_operator_edit_emits_notepad_updated(admin_client: Client) -> None:
    session = session_make()
    data = form_data(admin_client, session) | {"notepad_content": "operator notes"}
    admin_client.post(change_url(session), data)
    assert notepad_events(session) == [
        {"content": "operator notes", "version": 1, "author": "operator:admin"}
    ]


def test_stale_operator_edit_is_refused_with_the_current_content(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"notepad_content": "operator text"}
    agent_writes(session, "agent v2")
    response = admin_client.post(change_url(session), data)
    errors = response.context["adminform"].form.errors["notepad_content"]
    assert response.status_code == 200
    assert "now version 2" in errors[0] and "agent v2" in errors[0]


def test_stale_operator_edit_overwrites_nothing(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"notepad_content": "operator text", "title": "renamed"}
    agent_writes(session, "agent v2")
    admin_client.post(change_url(session), data)
    session.refresh_from_db()
    assert (session.notepad, session.notepad_version, session.title) == ("agent v2", 2, "")
    assert [author for _, author, _, _ in revisions(session)] == ["agent", "agent"]


def test_refused_form_keeps_the_operators_text_and_moves_to_the_current_version(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"notepad_content": "operator text"}
    agent_writes(session, "agent v2")
    form = admin_client.post(change_url(session), data).context["adminform"].form
    assert (form["notepad_content"].value(), form["notepad_base_version"].value()) == ("operator text", "2")


def test_resubmitting_after_a_refusal_replaces_the_current_notepad(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"notepad_content": "merged text"}
    agent_writes(session, "agent v2")
    form = admin_client.post(change_url(session), data).context["adminform"].form
    response = admin_client.post(
        change_url(session), data | {"notepad_base_version": form["notepad_base_version"].value()}
    )
    assert response.status_code == 302
    assert notepad_row(session) == ("merged text", 3)


def test_saving_other_fields_while_the_agent_writes_keeps_the_agents_notepad(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"title": "renamed"}
    agent_writes(session, "agent v2")
    response = admin_client.post(change_url(session), data)
    session.refresh_from_db()
    assert response.status_code == 302
    assert (session.title, session.notepad, session.notepad_version) == ("renamed", "agent v2", 2)


def test_saving_an_unchanged_notepad_writes_no_revision(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    admin_client.post(change_url(session), form_data(admin_client, session) | {"title": "renamed"})
    assert len(revisions(session)) == 1


def test_textarea_line_breaks_are_stored_as_newlines(admin_client: Client) -> None:
    session = session_make()
    data = form_data(admin_client, session) | {"notepad_content": "## Plan\r\n- [ ] a\r\n"}
    admin_client.post(change_url(session), data)
    assert notepad_row(session)[0] == "## Plan\n- [ ] a\n"


def test_operator_text_over_the_limit_is_a_form_error(admin_client: Client, monkeypatch: Any) -> None:
    monkeypatch.setattr(services, "NOTEPAD_MAX_CHARS", 5)
    session = session_make()
    response = admin_client.post(
        change_url(session), form_data(admin_client, session) | {"notepad_content": "123456"}
    )
    assert response.context["adminform"].form.errors["notepad_content"] == [
        "The notepad is limited to 5 characters."
    ]
    assert notepad_row(session) == (None, 0)


def test_session_added_with_a_notepad_starts_it_as_the_operators_first_revision(admin_client: Client) -> None:
    data = {
        "title": "added",
        "model": "scripted",
        "system_prompt": "",
        "context_window": "128000",
        "compact_threshold": "0.8",
        "settings": json.dumps(features().default_settings),
        "client_tools": "[]",
        "notepad_content": "first notes",
    }
    response = admin_client.post(reverse("admin:sessions_app_agentsession_add"), data)
    session = AgentSession.objects.get(title="added")
    assert response.status_code == 302
    assert revisions(session) == [(1, "operator:admin", "write", "first notes")]


def test_notepad_revisions_are_listed_in_the_admin(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    response = admin_client.get(reverse("admin:memory_app_notepadrevision_changelist"))
    assert response.status_code == 200 and str(session.id) in response.content.decode()


def test_notepad_revisions_cannot_be_added_in_the_admin(admin_client: Client) -> None:
    assert admin_client.get(reverse("admin:memory_app_notepadrevision_add")).status_code == 403


def test_notepad_revisions_cannot_be_changed_in_the_admin(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    revision = NotepadRevision.objects.get(session=session)
    url = reverse("admin:memory_app_notepadrevision_change", args=[revision.pk])
    assert admin_client.post(url, {"content": "rewritten history"}).status_code == 403


def test_notepad_revisions_cannot_be_deleted_in_the_admin(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent notes")
    revision = NotepadRevision.objects.get(session=session)
    url = reverse("admin:memory_app_notepadrevision_delete", args=[revision.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403


def test_a_conflict_shows_both_texts_with_their_line_breaks_escaped(admin_client: Client) -> None:
    session = session_make()
    agent_writes(session, "agent v1")
    data = form_data(admin_client, session) | {"notepad_content": "## Mine\r\n- first\r\n- <b>second</b>"}
    agent_writes(session, "## Agent\n- found <script>x()</script>\n- line two")
    html = admin_client.post(change_url(session), data).content.decode()
    current = html.split('<pre class="notepad-current"', 1)[1].split(">", 1)[1].split("</pre>", 1)[0]
    yours = html.split('<pre class="notepad-yours"', 1)[1].split(">", 1)[1].split("</pre>", 1)[0]
    assert current == "## Agent\n- found &lt;script&gt;x()&lt;/script&gt;\n- line two"
    assert yours == "## Mine\n- first\n- &lt;b&gt;second&lt;/b&gt;"
    assert "<script>x()" not in html
