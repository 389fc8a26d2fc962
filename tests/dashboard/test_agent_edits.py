"""An operator edits an agent's knowledge on the dashboard: the learned text, skills (new, edit,
delete, restore, import a zip, export), state (add, edit, delete), each under the conflict rule
(a change made meanwhile is never overwritten), as `operator:<username>`, with the bad cases."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sessions_app import services
from sessions_app.agent_skill_files import SKILL_ZIP_MAX_BYTES
from sessions_app.models import Agent, AgentPart, AgentSkill, AgentStateEntry, AgentVersion
from tests.dashboard.agent_data import agent_new, learned_write, skill_write, state_set

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
GOOD = "---\nname: weekly-report\ndescription: Write the weekly report.\n---\n\n# Weekly\n"


def url(name: str, agent: Agent, *args: object) -> str:
    return reverse(f"dashboard:{name}", args=[agent.pk, *args])


def zip_of(entries: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# ---------------------------------------------------------------------------
# The learned text
# ---------------------------------------------------------------------------
def test_the_learned_editor_opens_at_the_current_version(operator_client):
    agent = agent_new()
    learned_write(agent, "- a <b>fact</b>")
    html = operator_client.get(url("agent_learned", agent)).content.decode()
    assert 'name="base_version" value="1"' in html and "- a &lt;b&gt;fact&lt;/b&gt;</textarea>" in html


def test_a_saved_learned_text_is_a_new_version_by_the_operator(operator_client):
    agent = agent_new()
    learned_write(agent, "old")
    response = operator_client.post(
        url("agent_learned", agent), {"learned": "new\r\nline", "base_version": 1}, **HX
    )
    assert response.status_code == 200 and "Saved as version 2" in response.content.decode()
    agent.refresh_from_db()
    assert (agent.learned, agent.learned_version) == ("new\nline", 2)
    assert AgentVersion.objects.get(agent=agent, part=AgentPart.LEARNED, version=2).author == "operator:op"


def test_a_learned_text_changed_meanwhile_shows_both_and_overwrites_nothing(operator_client):
    agent = agent_new()
    learned_write(agent, "v1")
    learned_write(agent, "the model's <script>x()</script>")
    response = operator_client.post(url("agent_learned", agent), {"learned": "mine", "base_version": 1}, **HX)
    assert response.status_code == 409 and response["HX-Retarget"] == "#learned-editor"
    html = response.content.decode()
    assert "the model&#x27;s &lt;script&gt;x()&lt;/script&gt;" in html and "<script>x()" not in html
    assert 'name="base_version" value="2"' in html and "mine</textarea>" in html
    agent.refresh_from_db()
    assert agent.learned_version == 2
    assert (
        operator_client.post(
            url("agent_learned", agent), {"learned": "mine", "base_version": 2}, **HX
        ).status_code
        == 200
    )


def test_a_learned_text_over_the_agents_limit_is_a_form_error(operator_client):
    agent = agent_new(settings={"knowledge": {"learned_max_chars": 10}})
    response = operator_client.post(
        url("agent_learned", agent), {"learned": "x" * 11, "base_version": 0}, **HX
    )
    assert response.status_code == 422 and "over its limit of 10" in response.content.decode()
    agent.refresh_from_db()
    assert agent.learned_version == 0
    bad = operator_client.post(url("agent_learned", agent), {"learned": "x"}, **HX)
    assert bad.status_code == 422 and "base_version" in bad.content.decode()


def test_editing_the_learned_text_needs_the_csrf_token(operator):
    agent = agent_new()
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(url("agent_learned", agent), {"learned": "x", "base_version": 0}).status_code == 403
    agent.refresh_from_db()
    assert agent.learned_version == 0


# ---------------------------------------------------------------------------
# Skills
# ---------------------------------------------------------------------------
def skill_post(client, agent, data, name=""):
    target = url("agent_skill_edit", agent, name) if name else url("agent_skill_new", agent)
    return client.post(target, data, **HX)


def test_a_new_skill_is_written_by_the_operator_then_shown(operator_client):
    agent = agent_new()
    data = {"name": "pdf-tables", "description": "Read tables", "content": "# Steps\r\n", "base_version": 0}
    response = skill_post(operator_client, agent, data)
    assert response.status_code == 200
    assert response["HX-Redirect"] == url("agent_skill", agent, "pdf-tables") + "?version=1"
    skill = AgentSkill.objects.get(agent=agent, name="pdf-tables")
    assert (skill.description, skill.content, skill.version) == ("Read tables", "# Steps\n", 1)
    assert (
        AgentVersion.objects.get(agent=agent, part=AgentPart.SKILL, name="pdf-tables").author == "operator:op"
    )


def test_a_bad_skill_is_a_form_error_and_writes_nothing(operator_client):
    agent = agent_new(settings={"knowledge": {"max_skills": 1}})
    bad_name = skill_post(operator_client, agent, {"name": "Bad_Name", "description": "d", "base_version": 0})
    assert bad_name.status_code == 422 and "not a valid skill name" in bad_name.content.decode()
    skill_write(agent, "one", "d", "b")
    full = skill_post(operator_client, agent, {"name": "two", "description": "d", "base_version": 0})
    assert full.status_code == 422 and "already has 1 skills" in full.content.decode()
    assert list(AgentSkill.objects.filter(agent=agent).values_list("name", flat=True)) == ["one"]


def test_a_new_skill_whose_name_was_taken_meanwhile_overwrites_nothing(operator_client):
    agent = agent_new()
    skill_write(agent, "pdf-tables", "the model's <i>own</i>", "model body")
    response = skill_post(
        operator_client, agent, {"name": "pdf-tables", "description": "mine", "base_version": 0}
    )
    assert response.status_code == 409 and response["HX-Retarget"] == "#skill-editor"
    html = response.content.decode()
    assert "the model&#x27;s &lt;i&gt;own&lt;/i&gt;" in html and "model body" in html
    assert 'name="base_version" value="1"' in html
    assert AgentSkill.objects.get(agent=agent).content == "model body"


def test_a_skill_edit_is_a_new_version_and_a_stale_one_shows_both(operator_client):
    agent = agent_new()
    skill_write(agent, "s", "d", "v1 body")
    html = operator_client.get(url("agent_skill_edit", agent, "s")).content.decode()
    assert 'name="base_version" value="1"' in html and "v1 body</textarea>" in html
    # The name is the page's: a posted one is ignored.
    ok = skill_post(
        operator_client,
        agent,
        {"name": "other", "description": "d2", "content": "v2", "base_version": 1},
        "s",
    )
    assert ok.status_code == 200 and not AgentSkill.objects.filter(agent=agent, name="other").exists()
    assert AgentSkill.objects.get(agent=agent, name="s").content == "v2"
    stale = skill_post(operator_client, agent, {"description": "d3", "content": "v3", "base_version": 1}, "s")
    assert stale.status_code == 409 and "is at version 2 now" in stale.content.decode()
    assert AgentSkill.objects.get(agent=agent, name="s").version == 2
    assert operator_client.get(url("agent_skill_edit", agent, "nope")).status_code == 404


def test_a_skill_delete_keeps_its_versions_and_a_stale_one_deletes_nothing(operator_client):
    agent = agent_new()
    skill_write(agent, "s", "d", "v1")
    skill_write(agent, "s", "d", "v2")
    stale = operator_client.post(url("agent_skill_delete", agent, "s"), {"base_version": 1}, **HX)
    assert stale.status_code == 409 and "it is now version 2" in stale.content.decode()
    assert AgentSkill.objects.filter(agent=agent, name="s").exists()
    done = operator_client.post(url("agent_skill_delete", agent, "s"), {"base_version": 2}, **HX)
    assert done["HX-Redirect"] == url("agent", agent)
    assert not AgentSkill.objects.filter(agent=agent).exists()
    deletion = AgentVersion.objects.get(agent=agent, part=AgentPart.SKILL, name="s", version=3)
    assert deletion.deleted and deletion.author == "operator:op"


def test_a_skill_version_is_restored_as_a_new_version(operator_client):
    agent = agent_new()
    skill_write(agent, "s", "first description", "v1")
    skill_write(agent, "s", "second", "v2")
    page = operator_client.get(url("agent_skill", agent, "s"), {"version": 1}).content.decode()
    assert url("agent_skill_restore", agent, "s", 1) in page and 'name="base_version" value="2"' in page
    stale = operator_client.post(url("agent_skill_restore", agent, "s", 1), {"base_version": 1}, **HX)
    assert stale.status_code == 409 and AgentSkill.objects.get(agent=agent).version == 2
    done = operator_client.post(url("agent_skill_restore", agent, "s", 1), {"base_version": 2}, **HX)
    assert done["HX-Redirect"].endswith("?version=3")
    skill = AgentSkill.objects.get(agent=agent)
    assert (skill.description, skill.content, skill.version) == ("first description", "v1", 3)
    assert (
        operator_client.post(url("agent_skill_restore", agent, "s", 9), {"base_version": 3}).status_code
        == 404
    )


def test_a_deleted_skill_is_restored_from_version_0(operator_client):
    agent = agent_new()
    skill_write(agent, "s", "d", "v1")
    services.agent_skill_delete(agent_id=agent.pk, name="s", author="agent:x")
    page = operator_client.get(url("agent_skill", agent, "s"), {"version": 1}).content.decode()
    assert 'name="base_version" value="0"' in page
    deletion = operator_client.post(url("agent_skill_restore", agent, "s", 2), {"base_version": 0}, **HX)
    assert deletion.status_code == 422 and "is a deletion" in deletion.content.decode()
    assert (
        operator_client.post(url("agent_skill_restore", agent, "s", 1), {"base_version": 0}, **HX).status_code
        == 200
    )
    assert AgentSkill.objects.get(agent=agent).content == "v1"


def import_post(client, agent, data: bytes, name: str = "skills.zip"):
    upload = SimpleUploadedFile(name, data, content_type="application/zip")
    return client.post(url("agent_skills_import", agent), {"archive": upload}, **HX)


def test_an_import_writes_every_skill_of_the_zip(operator_client):
    agent = agent_new()
    skill_write(agent, "weekly-report", "old", "old body")
    data = zip_of(
        {"weekly-report/SKILL.md": GOOD, "triage/SKILL.md": "---\nname: triage\ndescription: t\n---\nB\n"}
    )
    response = import_post(operator_client, agent, data)
    assert response.status_code == 200
    assert "Imported 2 skill(s): triage, weekly-report." in response.content.decode()
    rows = dict(AgentSkill.objects.filter(agent=agent).values_list("name", "version"))
    assert rows == {"triage": 1, "weekly-report": 2}


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            {"bad/SKILL.md": "---\nname: bad\ndescription: [x\n---\n"},
            "bad/SKILL.md: its front matter is not valid YAML",
        ),
        ({"bad/SKILL.md": b"---\nname: bad\ndescription: \xff\n---\n"}, "bad/SKILL.md: not UTF-8 text."),
        ({"../evil/SKILL.md": GOOD}, "../evil/SKILL.md: a path outside the zip&#x27;s folder."),
    ],
)
def test_a_bad_import_names_the_path_and_writes_nothing(operator_client, entries, message):
    agent = agent_new()
    response = import_post(operator_client, agent, zip_of({"weekly-report/SKILL.md": GOOD, **entries}))
    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was imported." in html and message in html
    assert not AgentSkill.objects.filter(agent=agent).exists()


def test_an_import_too_big_not_a_zip_or_past_max_skills_writes_nothing(operator_client):
    agent = agent_new(settings={"knowledge": {"max_skills": 1}})
    # Past the memory limit of a form, under the zip's own: the view reads it and says so.
    big = import_post(operator_client, agent, b"0" * (SKILL_ZIP_MAX_BYTES + 1))
    assert big.status_code == 422 and "at most 5,242,880" in big.content.decode()
    assert import_post(operator_client, agent, b"0" * (SKILL_ZIP_MAX_BYTES + 200_000)).status_code == 413
    assert "not a zip archive" in import_post(operator_client, agent, b"nope").content.decode()
    two = zip_of({"weekly-report/SKILL.md": GOOD, "t/SKILL.md": "---\nname: t\ndescription: t\n---\n"})
    assert "already has 1 skills" in import_post(operator_client, agent, two).content.decode()
    assert not AgentSkill.objects.filter(agent=agent).exists()


def test_the_export_is_a_zip_the_import_reads_back(operator_client):
    agent = agent_new()
    skill_write(agent, "b-skill", "B: with a colon", "body b\n")
    skill_write(agent, "a-skill", "A", "")
    response = operator_client.get(url("agent_skills_export", agent))
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="auditor-skills.zip"'
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert names == ["a-skill/SKILL.md", "b-skill/SKILL.md"]
    other = agent_new("copy")
    assert import_post(operator_client, other, response.content).status_code == 200
    assert list(other.skills.order_by("name").values_list("name", "description", "content")) == [
        ("a-skill", "A", ""),
        ("b-skill", "B: with a colon", "body b\n"),
    ]


def test_skill_changes_need_the_csrf_token(operator):
    agent = agent_new()
    skill_write(agent, "s", "d", "b")
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(url("agent_skill_delete", agent, "s"), {"base_version": 1}).status_code == 403
    assert (
        client.post(
            url("agent_skill_new", agent), {"name": "t", "description": "d", "base_version": 0}
        ).status_code
        == 403
    )
    assert client.post(url("agent_skills_import", agent), {}).status_code == 403
    assert list(AgentSkill.objects.filter(agent=agent).values_list("name", flat=True)) == ["s"]


# ---------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------
def state_post(client, agent, key, value, base):
    return client.post(
        url("agent_state_edit", agent), {"key": key, "value": value, "base_version": base}, **HX
    )


def test_a_key_is_added_edited_and_deleted_by_the_operator(operator_client):
    agent = agent_new()
    added = state_post(operator_client, agent, "todo/next", '{"step": "<b>fix</b>"}', 0)
    assert added.status_code == 200 and "Saved &quot;todo/next&quot; as version 1." in added.content.decode()
    html = operator_client.get(url("agent_state_edit", agent), {"key": "todo/next"}).content.decode()
    assert 'name="base_version" value="1"' in html and "&lt;b&gt;fix&lt;/b&gt;" in html
    assert state_post(operator_client, agent, "todo/next", "[1, 2]", 1).status_code == 200
    entry = AgentStateEntry.objects.get(agent=agent, key="todo/next")
    assert (entry.value, entry.version, entry.author) == ([1, 2], 2, "operator:op")
    deleted = operator_client.post(
        url("agent_state_delete", agent), {"key": "todo/next", "base_version": 2}, **HX
    )
    assert deleted.status_code == 200 and not AgentStateEntry.objects.filter(agent=agent).exists()


def test_bad_json_or_a_value_over_the_limit_is_a_form_error(operator_client):
    agent = agent_new()
    bad = state_post(operator_client, agent, "k", "{not json", 0)
    assert bad.status_code == 422 and "Not JSON" in bad.content.decode()
    big = state_post(operator_client, agent, "k", json.dumps("x" * 70_000), 0)
    assert big.status_code == 422 and "at most 65,536" in big.content.decode()
    long_key = state_post(operator_client, agent, "k" * 201, "1", 0)
    assert long_key.status_code == 422
    assert not AgentStateEntry.objects.filter(agent=agent).exists()


def test_a_state_value_changed_meanwhile_shows_both_and_overwrites_nothing(operator_client):
    agent = agent_new()
    state_set(agent, "k", "v1")
    state_set(agent, "k", "<b>the model's</b>")
    stale = state_post(operator_client, agent, "k", '"mine"', 1)
    assert stale.status_code == 409 and stale["HX-Retarget"] == "#state-editor"
    html = stale.content.decode()
    assert "&lt;b&gt;the model&#x27;s&lt;/b&gt;" in html and 'name="base_version" value="2"' in html
    assert AgentStateEntry.objects.get(agent=agent, key="k").value == "<b>the model's</b>"
    taken = state_post(operator_client, agent, "k", '"mine"', 0)  # "Add" of a key that exists
    assert taken.status_code == 409
    stale_delete = operator_client.post(
        url("agent_state_delete", agent), {"key": "k", "base_version": 1}, **HX
    )
    assert stale_delete.status_code == 409 and "it is now version 2" in stale_delete.content.decode()
    assert AgentStateEntry.objects.filter(agent=agent, key="k").exists()


def test_state_changes_need_the_csrf_token(operator):
    agent = agent_new()
    state_set(agent, "k", 1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(url("agent_state_delete", agent), {"key": "k", "base_version": 1}).status_code == 403
    assert (
        client.post(url("agent_state_edit", agent), {"key": "k", "value": "2", "base_version": 1}).status_code
        == 403
    )
    assert AgentStateEntry.objects.get(agent=agent, key="k").value == 1
