"""The Agents section: the list, a new agent (checked as `agent.create` checks it), an agent's
page (instructions, learned text, skills, state, sessions) and editing its instructions under the
conflict rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sessions_app import services
from sessions_app.dashboard import selectors
from sessions_app.models import Agent, AgentPart, AgentSession, AgentVersion
from tests.dashboard.agent_data import agent_new, learned_write, skill_write, state_set
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db

AGENTS = reverse("dashboard:agents")
CREATE = reverse("dashboard:agent_create")


def agent_url(agent: Agent, name: str = "agent") -> str:
    return reverse(f"dashboard:{name}", args=[agent.pk])


def session_of(
    agent: Agent, title: str, *, owner_name: str | None = None, minutes_ago: int = 0
) -> AgentSession:
    owner = services.agent_token_create(name=owner_name)[0] if owner_name else None
    session = session_new(title=title)
    at = timezone.now() - timedelta(minutes=minutes_ago)
    AgentSession.objects.filter(pk=session.pk).update(agent=agent, owner=owner, last_activity_at=at)
    session.refresh_from_db()
    return session


# ---------------------------------------------------------------------------
# The list
# ---------------------------------------------------------------------------
def test_every_page_has_the_agents_nav_entry(operator_client):
    html = operator_client.get(reverse("dashboard:sessions")).content.decode()
    assert f'<a href="{AGENTS}">Agents</a>' in html


def test_the_list_shows_owner_sessions_last_activity_and_versions(operator_client):
    mine = agent_new("auditor")
    theirs = agent_new("helper", owner_name="terminal-chat")
    session_of(mine, "old", minutes_ago=90)
    newest = session_of(mine, "new", minutes_ago=5)
    learned_write(mine, "one")
    learned_write(mine, "two")
    response = operator_client.get(AGENTS)
    assert response.status_code == 200
    html = response.content.decode()
    rows = {a.name: vars(a) for a in selectors.agent_list()}  # with the list's annotations
    assert rows["auditor"]["session_count"] == 2 and rows["helper"]["session_count"] == 0
    assert rows["auditor"]["last_activity"] == newest.last_activity_at
    assert rows["helper"]["last_activity"] is None
    assert html.index('data-agent="auditor"') < html.index('data-agent="helper"')  # active first
    assert "client terminal-chat" in html and ">operators<" in html
    assert "instructions v1 · learned v2" in html
    assert "no sessions yet" in html
    assert reverse("dashboard:agent", args=[theirs.pk]) in html


def test_the_list_is_paged(operator_client):
    for i in range(selectors.AGENT_LIST_PAGE_SIZE + 1):
        agent_new(f"agent-{i:03d}")
    first = operator_client.get(AGENTS).content.decode()
    assert first.count('class="agent-row"') == selectors.AGENT_LIST_PAGE_SIZE
    assert "?page=2" in first
    second = operator_client.get(AGENTS, {"page": 2}).content.decode()
    assert second.count('class="agent-row"') == 1 and "?page=3" not in second


def test_a_bad_page_is_a_400_that_says_so(operator_client):
    response = operator_client.get(AGENTS, {"page": "x"})
    assert response.status_code == 400
    assert "page must be a whole number" in response.content.decode()


def test_the_agents_pages_need_an_operator(client):
    agent = agent_new()
    for url in (AGENTS, agent_url(agent), reverse("dashboard:agent_history", args=[agent.pk, "learned"])):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(CREATE, {"name": "x"}).status_code == 302
    assert Agent.objects.count() == 1


# ---------------------------------------------------------------------------
# A new agent
# ---------------------------------------------------------------------------
def test_new_agent_is_the_operators_with_its_first_version_by_the_operator(operator_client):
    response = operator_client.post(
        CREATE,
        {
            "name": "report-auditor",
            "instructions": "You audit reports.\r\nBe brief.",
            "model": "scripted",
            "settings": '{"notepad": {"position": "message"}}',
        },
    )
    agent = Agent.objects.get(name="report-auditor")
    assert response.status_code == 302 and response["Location"] == agent_url(agent)
    assert agent.owner_name == "" and agent.model == "scripted"
    assert agent.instructions == "You audit reports.\nBe brief."
    assert agent.settings["notepad"]["position"] == "message"
    version = AgentVersion.objects.get(agent=agent, part=AgentPart.INSTRUCTIONS)
    assert (version.version, version.author) == (1, "operator:op")


def test_new_agent_from_htmx_is_a_client_redirect(operator_client):
    response = operator_client.post(CREATE, {"name": "quick"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == agent_url(Agent.objects.get(name="quick"))


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "Bad Name"}, "name", "agent name must be 1-64 characters"),
        ({"name": "ok", "settings": "{nope"}, "settings", "Not JSON"),
        ({"name": "ok", "settings": '{"nonsense": 1}'}, "settings", "unknown setting settings.nonsense"),
        ({"name": "ok", "settings": '{"notepad": {"position": "sideways"}}'}, "settings", "must be one of"),
        ({"name": ""}, "name", "This field is required."),
    ],
)
def test_a_bad_value_is_a_form_error_on_its_field_and_creates_nothing(
    operator_client, fields, field, message
):
    response = operator_client.post(CREATE, fields, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    html = response.content.decode()
    start = html.index(f'data-field="{field}"')
    assert message in html[start : start + 2000]
    assert not Agent.objects.exists()


def test_a_name_the_operators_have_already_is_refused(operator_client):
    agent_new("auditor", instructions="the first")
    agent_new("auditor", owner_name="terminal-chat")  # another owner's: no clash
    response = operator_client.post(CREATE, {"name": "auditor", "instructions": "the second"})
    assert response.status_code == 422
    assert "The operators have an agent of that name already." in response.content.decode()
    assert Agent.objects.get(name="auditor", owner_name="").instructions == "the first"


def test_creating_an_agent_needs_the_csrf_token(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(CREATE, {"name": "sneaky"}).status_code == 403
    page = client.get(AGENTS).content.decode()
    assert 'name="csrfmiddlewaretoken"' in page[page.index('id="agent-create-form"') :]
    assert not Agent.objects.exists()


# ---------------------------------------------------------------------------
# One agent
# ---------------------------------------------------------------------------
def test_the_agent_page_shows_its_parts_and_renders_model_text_sanitized(operator_client):
    agent = agent_new(
        "auditor", instructions="You audit <b>reports</b>.", settings={"notepad": {"enabled": True}}
    )
    learned_write(agent, "- **check table 4**\n<script>window.pwned=1</script><img src=x onerror=alert(1)>")
    skill_write(agent, "pdf-tables", "Read tables out of PDFs <i>fast</i>", "# body")
    state_set(agent, "todo/next", {"step": "<b>fix</b>"})
    html = operator_client.get(agent_url(agent)).content.decode()
    assert "You audit &lt;b&gt;reports&lt;/b&gt;." in html
    assert "<strong>check table 4</strong>" in html
    assert "<script>window.pwned" not in html and "onerror" not in html and "<img" not in html
    assert "Read tables out of PDFs &lt;i&gt;fast&lt;/i&gt;" in html
    assert reverse("dashboard:agent_skill", args=[agent.pk, "pdf-tables"]) in html
    assert 'data-key="todo/next"' in html and "&lt;b&gt;fix&lt;/b&gt;" in html
    assert "v1</td>" in html
    assert reverse("dashboard:agent_history", args=[agent.pk, "learned"]) in html
    assert "&quot;enabled&quot;: true" in html


def test_the_agent_page_offers_the_knowledge_edits(operator_client):
    agent = agent_new()
    skill_write(agent, "one", "a skill", "body")
    state_set(agent, "k", 1)
    html = operator_client.get(agent_url(agent)).content.decode()
    posts = {chunk.split('"')[0] for chunk in html.split('hx-post="')[1:]}
    assert posts == {
        reverse("dashboard:agent_skills_import", args=[agent.pk]),
        reverse("dashboard:agent_state_delete", args=[agent.pk]),
    }
    for name in (
        "agent_instructions",
        "agent_learned",
        "agent_skill_new",
        "agent_state_edit",
        "agent_skills_export",
    ):
        assert reverse(f"dashboard:{name}", args=[agent.pk]) in html


def test_an_unknown_agent_is_a_404(operator_client):
    assert operator_client.get(reverse("dashboard:agent", args=[999])).status_code == 404
    assert operator_client.get(reverse("dashboard:agent_history", args=[999, "learned"])).status_code == 404


def test_its_sessions_are_linked_newest_first_with_their_client(operator_client):
    agent = agent_new()
    first = session_of(agent, "first session", owner_name="terminal-chat")
    second = session_of(agent, "second session")
    session_new(title="not this agent's")
    html = operator_client.get(agent_url(agent)).content.decode()
    assert html.index("second session") < html.index("first session")
    assert reverse("dashboard:session", args=[first.pk]) in html
    assert reverse("dashboard:session", args=[second.pk]) in html
    assert "client terminal-chat" in html and "not this agent" not in html


def test_its_sessions_are_bounded(operator_client):
    agent = agent_new()
    for i in range(selectors.AGENT_SESSIONS_SHOWN + 2):
        session_of(agent, f"s{i}")
    html = operator_client.get(agent_url(agent)).content.decode()
    assert html.count('class="agent-session-row') == selectors.AGENT_SESSIONS_SHOWN
    assert (
        f"({selectors.AGENT_SESSIONS_SHOWN + 2}, the newest {selectors.AGENT_SESSIONS_SHOWN} shown)" in html
    )


def test_state_is_paged_by_key_and_filtered_by_prefix(operator_client):
    agent = agent_new()
    size = selectors.AGENT_STATE_PAGE_SIZE
    for i in range(size + 3):
        state_set(agent, f"k/{i:03d}", i)
    state_set(agent, "other", "x")
    state_set(agent, "other", "y")
    html = operator_client.get(agent_url(agent)).content.decode()
    assert html.count('class="state-row"') == size and f"{size + 4} keys" in html
    last = f"k/{size - 1:03d}"
    assert f"after={last.replace('/', '%2F')}" in html
    part = operator_client.get(
        agent_url(agent),
        {"after": last, "key_prefix": "k/"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="agent-state",
    )
    body = part.content.decode()
    assert part.status_code == 200 and body.lstrip().startswith('<div id="agent-state">')
    assert body.count('class="state-row"') == 3 and "other" not in body
    assert "Next keys" not in body and "First keys" in body
    other = operator_client.get(agent_url(agent), {"key_prefix": "oth"}).content.decode()
    assert 'data-key="other"' in other and "v2</td>" in other and "1 key " in other


def test_a_state_query_too_long_is_a_400(operator_client):
    agent = agent_new()
    response = operator_client.get(agent_url(agent), {"key_prefix": "x" * 201})
    assert response.status_code == 400
    assert "at most 200 characters" in response.content.decode()


def test_a_large_state_value_is_clipped_on_the_page(operator_client):
    agent = agent_new()
    state_set(agent, "big", "x" * 10_000)
    html = operator_client.get(agent_url(agent)).content.decode()
    assert "clipped: 10002 characters in all" in html and "x" * 5000 not in html


# ---------------------------------------------------------------------------
# Editing the instructions
# ---------------------------------------------------------------------------
def instructions_post(client, agent: Agent, text: str, base: int):
    return client.post(
        agent_url(agent, "agent_instructions"),
        {"instructions": text, "base_version": base},
        HTTP_HX_REQUEST="true",
    )


def test_the_editor_opens_at_the_current_version(operator_client):
    agent = agent_new(instructions="You audit.")
    html = operator_client.get(agent_url(agent, "agent_instructions")).content.decode()
    assert 'name="base_version" value="1"' in html and ">\nYou audit.</textarea>" in html


def test_saved_instructions_are_a_new_version_by_the_operator(operator_client):
    agent = agent_new(instructions="You audit.")
    response = instructions_post(operator_client, agent, "You audit.\r\nTwice.", 1)
    assert response.status_code == 200
    assert "Saved as version 2" in response.content.decode()
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("You audit.\nTwice.", 2)
    version = AgentVersion.objects.get(agent=agent, part=AgentPart.INSTRUCTIONS, version=2)
    assert version.author == "operator:op" and version.content == "You audit.\nTwice."


def test_instructions_changed_meanwhile_are_not_overwritten(operator_client):
    agent = agent_new(instructions="v1 text")
    services.agent_instructions_set(agent_id=agent.pk, instructions="a client's <v2>", author="client:x")
    response = instructions_post(operator_client, agent, "the operator's text", 1)
    assert response.status_code == 409
    html = response.content.decode()
    assert response["HX-Retarget"] == "#instructions-editor"
    assert '<pre class="conflict-current">a client&#x27;s &lt;v2&gt;</pre>' in html
    assert 'name="base_version" value="2"' in html and "the operator&#x27;s text</textarea>" in html
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("a client's <v2>", 2)
    # Saving again from the moved base replaces it on purpose.
    assert instructions_post(operator_client, agent, "the operator's text", 2).status_code == 200
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("the operator's text", 3)


def test_unchanged_instructions_make_no_version(operator_client):
    agent = agent_new(instructions="same")
    response = instructions_post(operator_client, agent, "same", 1)
    assert "No change" in response.content.decode()
    assert AgentVersion.objects.filter(agent=agent, part=AgentPart.INSTRUCTIONS).count() == 1


def test_a_bad_instructions_post_is_a_422_and_changes_nothing(operator_client):
    agent = agent_new(instructions="same")
    response = operator_client.post(
        agent_url(agent, "agent_instructions"), {"instructions": "x"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 422 and "base_version" in response.content.decode()
    agent.refresh_from_db()
    assert agent.instructions == "same"


def test_editing_instructions_needs_the_csrf_token(operator):
    agent = agent_new(instructions="same")
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(agent_url(agent, "agent_instructions"), {"instructions": "x", "base_version": 1})
    assert response.status_code == 403
    agent.refresh_from_db()
    assert agent.instructions == "same"
