"""An agent's skills: the name, description and body rules, versions across writes and deletes,
the count limit, reading, the one-transaction import, and `agent.updated`."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app import agent_knowledge_selectors as selectors
from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError, AgentSkillConflict
from sessions_app.agent_models import Agent, AgentSkill
from sessions_app.services import SkillFields
from tests.sessions_app.agent_knowledge_support import (
    agent_events,
    agent_make,
    agent_session_make,
    versions,
)

pytestmark = pytest.mark.django_db


def write(
    agent: Agent, name: str = "weekly-report", session: Any = None, max_skills: int = 64, **fields: Any
):
    return services.agent_skill_write(
        agent_id=agent.pk,
        name=name,
        description=fields.get("description", "Write the weekly report."),
        content=fields.get("content", "1. Gather.\n2. Write."),
        author=f"agent:{session.id}" if session else "operator:ann",
        max_skills=max_skills,
        session_id=session.id if session else None,
    )


def skills(agent: Agent) -> list[tuple[str, str, str, int]]:
    return [(s.name, s.description, s.content, s.version) for s in AgentSkill.objects.filter(agent=agent)]


def test_write_creates_version_one_and_announces_it() -> None:
    agent = agent_make()
    session = agent_session_make(agent)
    row = write(agent, session=session)
    assert row.version == 1
    assert skills(agent) == [("weekly-report", "Write the weekly report.", "1. Gather.\n2. Write.", 1)]
    assert versions(agent, "skill", "weekly-report") == [
        (1, "1. Gather.\n2. Write.", False, f"agent:{session.id}")
    ]
    assert agent_events(session) == [
        {
            "agent": "helper",
            "part": "skill",
            "name": "weekly-report",
            "version": 1,
            "author": f"agent:{session.id}",
        }
    ]


def test_write_again_replaces_it_as_version_two_and_keeps_version_one() -> None:
    agent = agent_make()
    write(agent, content="old")
    write(agent, description="New description.", content="new")
    assert skills(agent) == [("weekly-report", "New description.", "new", 2)]
    assert [v[:3] for v in versions(agent, "skill", "weekly-report")] == [
        (1, "old", False),
        (2, "new", False),
    ]


def test_delete_removes_the_skill_and_keeps_its_versions_then_a_new_write_goes_on_numbering() -> None:
    agent = agent_make()
    session = agent_session_make(agent)
    write(agent, content="v1")
    row = services.agent_skill_delete(
        agent_id=agent.pk, name="weekly-report", author=f"agent:{session.id}", session_id=session.id
    )
    assert (row.version, row.deleted, skills(agent)) == (2, True, [])
    assert agent_events(session)[-1]["version"] == 2
    assert write(agent, content="v3").version == 3
    assert [v[:3] for v in versions(agent, "skill", "weekly-report")] == [
        (1, "v1", False),
        (2, "", True),
        (3, "v3", False),
    ]


def test_deleting_an_unknown_skill_names_the_skills_there_are() -> None:
    agent = agent_make()
    write(agent, name="b-skill")
    write(agent, name="a-skill")
    with pytest.raises(AgentKnowledgeError, match=r'no skill named "nope"\. Its skills: a-skill, b-skill\.'):
        services.agent_skill_delete(agent_id=agent.pk, name="nope", author="operator:ann")


@pytest.mark.parametrize(
    "name",
    ["", "Weekly", "weekly_report", "-weekly", "weekly-", "weekly--report", "week ly", "é", "a" * 65],
)
def test_a_bad_name_is_refused_and_nothing_is_written(name: str) -> None:
    agent = agent_make()
    with pytest.raises(AgentKnowledgeError):
        write(agent, name=name)
    assert skills(agent) == []
    assert versions(agent, "skill", name) == []


@pytest.mark.parametrize("name", ["a", "a1", "weekly-report-2", "a" * 64])
def test_a_good_name_is_accepted(name: str) -> None:
    assert write(agent_make(), name=name).name == name


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"description": ""}, "needs a description"),
        ({"description": "   "}, "needs a description"),
        ({"description": "d" * 1025}, "1,025 characters long; at most 1,024"),
        ({"content": "c" * 100_001}, "100,001 characters long; at most 100,000"),
    ],
)
def test_a_bad_description_or_body_is_refused(fields: dict, message: str) -> None:
    agent = agent_make()
    with pytest.raises(AgentKnowledgeError, match=message):
        write(agent, **fields)
    assert skills(agent) == []


def test_the_longest_description_and_body_are_accepted() -> None:
    assert write(agent_make(), description="d" * 1024, content="c" * 100_000).version == 1


def test_a_new_skill_past_max_skills_is_refused_but_replacing_one_is_not() -> None:
    agent = agent_make()
    write(agent, name="a", max_skills=2)
    write(agent, name="b", max_skills=2)
    with pytest.raises(AgentKnowledgeError, match="already has 2 skills"):
        write(agent, name="c", max_skills=2)
    assert write(agent, name="a", content="again", max_skills=2).version == 2
    assert [s[0] for s in skills(agent)] == ["a", "b"]


def test_read_returns_the_current_skill_and_an_unknown_one_is_an_error() -> None:
    agent = agent_make()
    write(agent, content="body")
    assert selectors.agent_skill_get(agent_id=agent.pk, name="weekly-report") == selectors.SkillView(
        "weekly-report", "Write the weekly report.", "body", 1
    )
    with pytest.raises(AgentKnowledgeError, match="Its skills: weekly-report"):
        selectors.agent_skill_get(agent_id=agent.pk, name="other")


def test_skills_are_per_agent() -> None:
    mine, theirs = agent_make(), agent_make(owner_name="other")
    write(mine)
    with pytest.raises(AgentKnowledgeError, match="Its skills: none yet"):
        selectors.agent_skill_get(agent_id=theirs.pk, name="weekly-report")


def test_import_writes_every_skill_in_one_transaction() -> None:
    agent = agent_make()
    write(agent, name="a", content="old")
    rows = services.agent_skills_import(
        agent_id=agent.pk,
        skills=[SkillFields("a", "A.", "new"), SkillFields("b", "B.", "b body")],
        author="operator:ann",
        max_skills=64,
    )
    assert [(r.name, r.version) for r in rows] == [("a", 2), ("b", 1)]


@pytest.mark.parametrize(
    ("skills_given", "max_skills", "message"),
    [
        ([SkillFields("ok", "Ok.", "x"), SkillFields("Bad_Name", "B.", "x")], 64, "Bad_Name"),
        ([SkillFields("ok", "Ok.", "x"), SkillFields("ok", "Again.", "y")], 64, "same name: ok"),
        ([SkillFields("ok", "Ok.", "x"), SkillFields("more", "More.", "y")], 2, "already has 2 skills"),
    ],
)
def test_an_import_with_one_bad_skill_writes_nothing(
    skills_given: list, max_skills: int, message: str
) -> None:
    agent = agent_make()
    write(agent, name="kept", content="kept")
    with pytest.raises(AgentKnowledgeError, match=message):
        services.agent_skills_import(
            agent_id=agent.pk, skills=skills_given, author="operator:ann", max_skills=max_skills
        )
    assert skills(agent) == [("kept", "Write the weekly report.", "kept", 1)]
    assert versions(agent, "skill", "ok") == []


def test_an_operators_stale_expected_version_overwrites_nothing() -> None:
    agent = agent_make()
    write(agent, content="agent's")
    write(agent, content="agent's again")
    with pytest.raises(AgentSkillConflict, match='"weekly-report" is at version 2, not version 1') as caught:
        services.agent_skill_write(
            agent_id=agent.pk,
            name="weekly-report",
            description="d",
            content="operator's",
            author="operator:ann",
            max_skills=64,
            expected_version=1,
        )
    assert caught.value.version == 2
    assert skills(agent)[0][2:] == ("agent's again", 2)
    assert (
        services.agent_skill_write(
            agent_id=agent.pk,
            name="weekly-report",
            description="d",
            content="operator's",
            author="operator:ann",
            max_skills=64,
            expected_version=2,
        ).version
        == 3
    )


def test_a_delete_with_a_stale_expected_version_deletes_nothing() -> None:
    agent = Agent.objects.create(owner_name="c", name="stale-skill-delete")
    for body in ("one", "two"):
        services.agent_skill_write(
            agent_id=agent.pk, name="s", description="d", content=body, author="a", max_skills=5
        )
    with pytest.raises(AgentSkillConflict) as caught:
        services.agent_skill_delete(agent_id=agent.pk, name="s", author="operator:o", expected_version=1)
    assert caught.value.version == 2
    assert AgentSkill.objects.get(agent=agent, name="s").content == "two"
    services.agent_skill_delete(agent_id=agent.pk, name="s", author="operator:o", expected_version=2)
    assert not AgentSkill.objects.filter(agent=agent).exists()
