"""An agent's histories: its instructions and learned text (every version, diffs, restore as a
new version naming what it restored, refused when the text changed meanwhile) and each skill's
versions (read, rendered sanitized)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app import services
from sessions_app.dashboard import selectors
from sessions_app.models import Agent, AgentPart, AgentVersion
from tests.dashboard.agent_data import SESSION_AUTHOR, agent_new, learned_write, skill_write

pytestmark = pytest.mark.django_db


def history_url(agent: Agent, part: str) -> str:
    return reverse("dashboard:agent_history", args=[agent.pk, part])


def restore_url(agent: Agent, part: str, version: int) -> str:
    return reverse("dashboard:agent_restore", args=[agent.pk, part, version])


@pytest.fixture
def taught() -> Agent:
    """An agent whose sessions wrote its learned text three times."""
    agent = agent_new()
    learned_write(agent, "- tables are in PDF\n")
    learned_write(agent, "- tables are in PDF\n- totals in table 4\n")
    learned_write(agent, "- garbled <script>x</script>\n")
    return agent


def test_the_learned_history_lists_every_version_with_its_author(operator_client, taught):
    response = operator_client.get(history_url(taught, "learned"))
    assert response.status_code == 200
    html = response.content.decode()
    for version in (1, 2, 3):
        assert f'data-version="{version}"' in html
    assert 'data-version="0"' in html  # the empty text before the first change
    assert html.count(SESSION_AUTHOR) >= 3
    assert "(now version 3)" in html and 'class="badge">current' in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x" not in html


def test_a_version_is_diffed_against_the_one_before_or_the_text_now(operator_client, taught):
    before = operator_client.get(history_url(taught, "learned"), {"version": 2}).content.decode()
    assert "From version 1 to version 2" in before and "+1 −0 lines" in before
    assert '<td class="code">- totals in table 4</td>' in before
    now = operator_client.get(
        history_url(taught, "learned"), {"version": 1, "against": "current"}
    ).content.decode()
    assert "From version 1 to the current text (version 3)" in now and "+1 −1 lines" in now


def test_the_history_is_paged(operator_client):
    agent = agent_new()
    for i in range(selectors.HISTORY_PAGE_SIZE + 2):
        learned_write(agent, f"line {i}\n")
    first = operator_client.get(history_url(agent, "learned")).content.decode()
    assert first.count("<li data-version=") == selectors.HISTORY_PAGE_SIZE
    assert "Older versions" in first and 'data-version="0"' not in first
    older = operator_client.get(history_url(agent, "learned"), {"before": 3}).content.decode()
    assert 'data-version="2"' in older and 'data-version="1"' in older and 'data-version="0"' in older


def test_a_version_never_written_or_a_bad_query_is_refused(operator_client, taught):
    assert operator_client.get(history_url(taught, "learned"), {"version": 9}).status_code == 404
    assert operator_client.get(history_url(taught, "tools"), {}).status_code == 404
    response = operator_client.get(history_url(taught, "learned"), {"version": "x"})
    assert response.status_code == 400 and "version must be a whole number" in response.content.decode()


def test_restore_is_a_new_version_that_names_what_it_restored(operator_client, taught):
    response = operator_client.post(
        restore_url(taught, "learned", 2), {"base_version": 3}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Restored version 2 as version 4." in html and "restore of v2" in html
    taught.refresh_from_db()
    assert taught.learned_version == 4 and taught.learned == "- tables are in PDF\n- totals in table 4\n"
    row = AgentVersion.objects.get(agent=taught, part=AgentPart.LEARNED, version=4)
    assert (row.author, row.restored_from) == ("operator:op", 2)


def test_restore_without_htmx_goes_to_the_new_version(operator_client, taught):
    response = operator_client.post(restore_url(taught, "learned", 1), {"base_version": 3})
    assert (
        response.status_code == 302 and response["Location"] == f"{history_url(taught, 'learned')}?version=4"
    )


def test_restore_after_the_agent_wrote_meanwhile_overwrites_nothing(operator_client, taught):
    learned_write(taught, "- written while the operator looked\n")
    response = operator_client.post(
        restore_url(taught, "learned", 1), {"base_version": 3}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 409
    assert response["HX-Retarget"] == "#restore-editor"
    html = response.content.decode()
    assert "changed since this page was loaded (it is now version 4)" in html
    assert f"{history_url(taught, 'learned')}?version=4" in html
    taught.refresh_from_db()
    assert (taught.learned_version, taught.learned) == (4, "- written while the operator looked\n")


def test_restoring_the_current_version_or_one_never_written_is_refused(operator_client, taught):
    current = operator_client.post(
        restore_url(taught, "learned", 3), {"base_version": 3}, HTTP_HX_REQUEST="true"
    )
    assert current.status_code == 422 and "nothing to restore" in current.content.decode()
    assert operator_client.post(restore_url(taught, "learned", 7), {"base_version": 3}).status_code == 404
    assert operator_client.post(restore_url(taught, "learned", 2), {}).status_code == 422
    assert operator_client.post(restore_url(taught, "skill", 1), {"base_version": 3}).status_code == 404
    taught.refresh_from_db()
    assert taught.learned_version == 3


def test_the_current_version_and_version_0_offer_no_restore(operator_client, taught):
    current = operator_client.get(history_url(taught, "learned")).content.decode()
    zero = operator_client.get(history_url(taught, "learned"), {"version": 0}).content.decode()
    older = operator_client.get(history_url(taught, "learned"), {"version": 1}).content.decode()
    assert "Restore this version" not in current and "Restore this version" not in zero
    assert "Restore this version" in older and 'name="csrfmiddlewaretoken"' in older


def test_restore_needs_the_csrf_token(operator, taught):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(restore_url(taught, "learned", 1), {"base_version": 3}).status_code == 403
    taught.refresh_from_db()
    assert taught.learned_version == 3


def test_the_instructions_history_restores_too(operator_client):
    agent = agent_new(instructions="first")
    services.agent_instructions_set(agent_id=agent.pk, instructions="second", author="client:terminal-chat")
    html = operator_client.get(history_url(agent, "instructions"), {"version": 1}).content.decode()
    assert "create" in html and "client:terminal-chat" in html and 'data-version="0"' not in html
    response = operator_client.post(
        restore_url(agent, "instructions", 1), {"base_version": 2}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("first", 3)


# ---------------------------------------------------------------------------
# Skills
# ---------------------------------------------------------------------------
def test_a_skill_page_shows_each_version_sanitized_with_its_diff(operator_client):
    agent = agent_new()
    skill_write(agent, "pdf-tables", "Read tables", "# Steps\n1. open\n")
    skill_write(
        agent,
        "pdf-tables",
        "Read tables <b>well</b>",
        "# Steps\n1. open\n2. **read** <script>window.pwned=1</script><img src=x onerror=alert(1)>\n",
    )
    url = reverse("dashboard:agent_skill", args=[agent.pk, "pdf-tables"])
    html = operator_client.get(url).content.decode()
    assert "<h1>Skill" in html and 'data-version="2"' in html and 'data-version="1"' in html
    assert 'data-version="0"' not in html
    assert "<strong>read</strong>" in html and "<script>window.pwned" not in html and "<img" not in html
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html  # the text, escaped
    assert "Read tables &lt;b&gt;well&lt;/b&gt;" in html
    assert "From version 1 to version 2" in html and "+1 −0 lines" in html
    # The current version offers an edit and a delete (from version 2), no restore.
    assert "Restore this version" not in html
    assert reverse("dashboard:agent_skill_delete", args=[agent.pk, "pdf-tables"]) in html
    assert 'name="base_version" value="2"' in html
    first = operator_client.get(url, {"version": 1}).content.decode()
    assert "<h1>Steps</h1>" in first and 'class="skill-description">Read tables<' in first


def test_a_deleted_skill_keeps_its_versions(operator_client):
    agent = agent_new()
    skill_write(agent, "gone", "A skill", "body")
    AgentVersion.objects.create(
        agent=agent, part=AgentPart.SKILL, name="gone", version=2, deleted=True, author=SESSION_AUTHOR
    )
    agent.skills.filter(name="gone").delete()
    html = operator_client.get(reverse("dashboard:agent_skill", args=[agent.pk, "gone"])).content.decode()
    assert "deleted" in html and "delete" in html
    assert (
        "gone"
        not in operator_client.get(reverse("dashboard:agent", args=[agent.pk]))
        .content.decode()
        .split('id="agent-skills"')[1]
        .split("</section>")[0]
    )


def test_an_unknown_skill_is_a_404(operator_client):
    agent = agent_new()
    assert operator_client.get(reverse("dashboard:agent_skill", args=[agent.pk, "nope"])).status_code == 404
    other = agent_new("other")
    skill_write(other, "theirs", "not this agent's", "body")
    assert operator_client.get(reverse("dashboard:agent_skill", args=[agent.pk, "theirs"])).status_code == 404
