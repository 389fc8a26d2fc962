"""A session's page and row name its agent (linked) and its client (the token's name); an
operator ends a session from its page, after which it shows it is ended and has no message box."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app import services
from sessions_app.dashboard.fragments import session_fragments
from sessions_app.models import AgentSession, SessionEvent, SessionStatus
from tests.dashboard.agent_data import agent_new
from tests.dashboard.conftest import chat, session_new

pytestmark = pytest.mark.django_db(transaction=True)


def session_url(session: AgentSession, name: str = "session") -> str:
    return reverse(f"dashboard:{name}", args=[session.pk])


def agents_session() -> AgentSession:
    agent = agent_new("auditor")
    token = services.agent_token_create(name="terminal-chat")[0]
    session = session_new(title="Audit Q3")
    AgentSession.objects.filter(pk=session.pk).update(agent=agent, owner=token)
    session.refresh_from_db()
    return session


def test_the_session_page_names_its_agent_and_its_client(operator_client):
    session = agents_session()
    html = operator_client.get(session_url(session)).content.decode()
    assert f'href="{reverse("dashboard:agent", args=[session.agent_id])}"' in html
    assert ">agent auditor</a>" in html
    assert "client terminal-chat" in html and "agent terminal-chat" not in html


def test_a_session_without_agent_or_client_says_so(operator_client):
    html = operator_client.get(session_url(session_new(title="plain"))).content.decode()
    assert "operator session" in html and "agent-link" not in html


def test_the_session_list_names_client_and_agent(operator_client):
    session = agents_session()
    html = operator_client.get(reverse("dashboard:sessions")).content.decode()
    row = html[html.index(f'id="session-row-{session.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "client terminal-chat" in row and ">agent auditor</a>" in row
    assert ">client terminal-chat</option>" in html and ">agent terminal-chat<" not in html
    found = operator_client.get(reverse("dashboard:sessions"), {"q": "audito"}).content.decode()
    assert f'id="session-row-{session.pk}"' in found


def test_ending_a_session_from_its_page(operator_client):
    session = agents_session()
    chat(session.pk, "hello")
    page = operator_client.get(session_url(session)).content.decode()
    assert session_url(session, "session_end") in page and "End session" in page
    response = operator_client.post(session_url(session, "session_end"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "This session has ended" in html and 'id="session-status"' in html and "status-ended" in html
    session.refresh_from_db()
    assert session.status == SessionStatus.ENDED and session.ended_at is not None
    event = SessionEvent.objects.get(session=session, type="session.ended")
    assert event.payload == {"reason": "operator"}
    page = operator_client.get(session_url(session)).content.decode()
    assert "This session has ended" in page and 'name="content"' not in page
    assert session_url(session, "session_end") not in page
    assert session_url(session, "session_delete") in page  # still deletable
    assert "hello" in page  # still readable


def test_an_ended_session_takes_no_message(operator_client):
    session = agents_session()
    operator_client.post(session_url(session, "session_end"))
    response = operator_client.post(
        session_url(session, "message_send"), {"content": "more"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 409
    assert "This session has ended" in response.content.decode()
    assert not session.messages.exists()


def test_ending_without_htmx_redirects_and_ending_twice_changes_nothing(operator_client):
    session = agents_session()
    response = operator_client.post(session_url(session, "session_end"))
    assert response.status_code == 302 and response["Location"] == session_url(session)
    operator_client.post(session_url(session, "session_end"))
    assert SessionEvent.objects.filter(session=session, type="session.ended").count() == 1


def test_ending_ends_its_sub_sessions(operator_client):
    session = session_new(title="parent")
    chat(session.pk, "spawn echo 42")
    child = AgentSession.objects.get(parent_session=session)
    operator_client.post(session_url(session, "session_end"))
    child.refresh_from_db()
    assert child.status == SessionStatus.ENDED


def test_ending_needs_the_csrf_token_and_an_operator(operator, client):
    session = session_new(title="kept")
    assert client.post(session_url(session, "session_end")).status_code == 302  # to the login page
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert strict.post(session_url(session, "session_end")).status_code == 403
    session.refresh_from_db()
    assert session.status != SessionStatus.ENDED and session.ended_at is None


def test_ending_an_unknown_session_is_a_404(operator_client):
    url = reverse("dashboard:session_end", args=["00000000-0000-0000-0000-000000000000"])
    assert operator_client.post(url).status_code == 404


def test_the_live_page_swaps_its_message_box_when_the_session_ends(operator_client):
    session = session_new(title="watched")
    operator_client.post(session_url(session, "session_end"))
    event = SessionEvent.objects.get(session=session, type="session.ended")
    html = session_fragments(
        session_id=session.pk,
        events=[{"type": "session.ended", "seq": event.seq, "reason": "operator"}],
        operator="op",
    )
    assert 'id="message-form" class="message-form ended-box" hx-swap-oob="true"' in html
    assert 'id="session-status" class="badge status-ended" hx-swap-oob="true"' in html
