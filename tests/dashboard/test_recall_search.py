"""The dashboard's search of what sessions said: the same search the model runs (`recall`), on
an agent's page over its sessions and on a session's page over its archives; each hit links to its
message in place; bad queries are form errors; operators only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app import services
from sessions_app.models import Agent, AgentSession
from tests.dashboard.agent_data import agent_new
from tests.dashboard.conftest import message_store, session_new

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def told(session: AgentSession, text: str, *, epoch: int = 0) -> None:
    content = [{"type": "text", "text": text}]
    message = message_store(session, "user", content, epoch=epoch)
    services.recall_message_index(
        session_id=session.pk,
        epoch=epoch,
        role="user",
        content=content,
        at=message.created_at,
        message_id=message.pk,
    )


def archived(session: AgentSession) -> None:
    AgentSession.objects.filter(pk=session.pk).update(epoch=1)
    session.refresh_from_db()


def test_the_agent_page_has_the_search_box(operator_client):
    agent = agent_new()
    html = operator_client.get(reverse("dashboard:agent", args=[agent.pk])).content.decode()
    assert 'id="agent-search"' in html and reverse("dashboard:agent_search", args=[agent.pk]) in html


def test_an_agents_search_finds_what_its_sessions_said_and_links_it_in_place(operator_client):
    agent: Agent = agent_new()
    first = session_new(agent=agent, title="first <b>day</b>")
    told(first, "The staging port is 8443, said <script>alert(1)</script> once.")
    other = session_new(title="not the agent's")
    told(other, "The staging port is 9999 here.")
    response = operator_client.get(
        reverse("dashboard:agent_search", args=[agent.pk]), {"q": "staging port"}, **HX
    )
    html = response.content.decode()
    assert response.status_code == 200 and html.count('class="recall-hit"') == 1
    assert "8443" in html and "9999" not in html
    assert "&lt;script&gt;" in html and "<script>alert" not in html and "<b>day</b>" not in html
    place = reverse("dashboard:message_in_place", args=[first.pk, 0])
    assert place in html
    page = operator_client.get(place).content.decode()
    assert 'id="found"' in page and "8443" in page and "current epoch" in page


def test_a_session_without_an_agent_searches_its_archives_from_the_archive_tab(operator_client):
    session = session_new()
    told(session, "FINDING: the failing shard is 17.")
    archived(session)
    told(session, "the failing shard now in view", epoch=1)
    panel = operator_client.get(reverse("dashboard:archive", args=[session.pk])).content.decode()
    assert reverse("dashboard:session_search", args=[session.pk]) in panel
    html = operator_client.get(
        reverse("dashboard:session_search", args=[session.pk]), {"q": "failing shard"}, **HX
    ).content.decode()
    assert "shard is 17" in html and "now in view" not in html  # the current epoch is in view
    page = operator_client.get(reverse("dashboard:message_in_place", args=[session.pk, 0])).content.decode()
    assert "open the archive of epoch 0" in page


@pytest.mark.parametrize("query", ["", "   ", '*** "" ---', "x" * 2001])
def test_a_query_without_words_or_too_long_is_a_form_error(operator_client, query):
    agent = agent_new()
    response = operator_client.get(reverse("dashboard:agent_search", args=[agent.pk]), {"q": query}, **HX)
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()


def test_hostile_words_are_searched_as_words(operator_client):
    agent = agent_new()
    session = session_new(agent=agent)
    told(session, "NEAR the OR gate")
    for query in ("NEAR(a b)", '"OR" AND -x', "gate*", "col:gate", "a & b | !c"):
        response = operator_client.get(reverse("dashboard:agent_search", args=[agent.pk]), {"q": query}, **HX)
        assert response.status_code == 200, query


def test_a_message_that_is_not_there_is_404(operator_client):
    session = session_new()
    assert operator_client.get(reverse("dashboard:message_in_place", args=[session.pk, 5])).status_code == 404


def test_search_pages_need_an_operator(client):
    session = session_new()
    told(session, "a secret word")
    agent = agent_new()
    for url in (
        reverse("dashboard:agent_search", args=[agent.pk]),
        reverse("dashboard:session_search", args=[session.pk]),
        reverse("dashboard:message_in_place", args=[session.pk, 0]),
    ):
        response = client.get(url, {"q": "secret"})
        assert response.status_code in (302, 403) and b"secret word" not in response.content
