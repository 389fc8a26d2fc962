"""The agent's learned text (`edit_system_prompt`'s service): each operation, a version per change,
`agent.updated` on the session that made it, and every bad case leaving everything as it was."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.agent_models import Agent
from sessions_app.authors import agent_session_author, operator_author
from sessions_app.common.text_edits import TextEdit
from tests.sessions_app.agent_knowledge_support import (
    agent_events,
    agent_make,
    agent_session_make,
    versions,
)

pytestmark = pytest.mark.django_db

MAX = 8000


def learned(agent: Agent) -> tuple[str, int]:
    agent.refresh_from_db(fields=["learned", "learned_version"])
    return agent.learned, agent.learned_version


def edit(agent: Agent, session: Any = None, max_chars: int = MAX, **fields: Any) -> Any:
    return services.agent_learned_update(
        agent_id=agent.pk,
        edit=TextEdit(**fields),
        author=agent_session_author(session.id) if session else operator_author("ann"),
        max_chars=max_chars,
        session_id=session.id if session else None,
    )


def test_append_makes_version_one_with_its_author_and_announces_it_on_the_session() -> None:
    agent = agent_make()
    session = agent_session_make(agent)
    row = edit(agent, session, operation="append", content="Be brief.\n")
    author = f"agent:{session.id}"
    assert (row.version, learned(agent)) == (1, ("Be brief.\n", 1))
    assert versions(agent, "learned") == [(1, "Be brief.\n", False, author)]
    assert agent_events(session) == [
        {"agent": "helper", "part": "learned", "name": "", "version": 1, "author": author}
    ]


@pytest.mark.parametrize(
    ("fields", "after"),
    [
        ({"operation": "prepend", "content": "0 "}, "0 a b a"),
        ({"operation": "find_replace", "find": "a", "replace": "c"}, "c b a"),
        ({"operation": "find_replace", "find": "a", "replace": "c", "replace_all": True}, "c b c"),
        ({"operation": "find_replace", "find": "a ", "replace": ""}, "b a"),
        ({"operation": "delete", "content": "a"}, " b "),
    ],
)
def test_each_operation_applies_as_update_notepad_does(fields: dict, after: str) -> None:
    agent = agent_make(learned="a b a", learned_version=3)
    edit(agent, **fields)
    assert learned(agent) == (after, 4)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"operation": "find_replace", "find": "zzz", "replace": "y"}, 'The "find" text does not occur'),
        ({"operation": "delete", "content": "zzz"}, 'The "content" to delete does not occur'),
        ({"operation": "append"}, 'needs "content"'),
        ({"operation": "append", "content": ""}, "must not be empty"),
        ({"operation": "find_replace", "find": "a"}, 'needs "replace"'),
        ({"operation": "rewrite", "content": "x"}, 'Unknown operation "rewrite"'),
    ],
)
def test_an_edit_that_cannot_apply_changes_nothing(fields: dict, message: str) -> None:
    agent = agent_make(learned="a b", learned_version=2)
    session = agent_session_make(agent)
    with pytest.raises(AgentKnowledgeError, match=message):
        edit(agent, session, **fields)
    assert learned(agent) == ("a b", 2)
    assert versions(agent, "learned") == []
    assert agent_events(session) == []


def test_text_not_found_shows_the_current_learned_text() -> None:
    # The system prompt may show an older version (pinned until the next compaction).
    agent = agent_make(learned="Prefer tables.\n", learned_version=5)
    with pytest.raises(AgentKnowledgeError) as caught:
        edit(agent, operation="delete", content="Be brief.")
    assert str(caught.value).endswith("next compaction).\n\nPrefer tables.\n")


def test_text_not_found_in_an_empty_learned_text_says_it_is_empty() -> None:
    with pytest.raises(AgentKnowledgeError, match=r"\(the learned text is empty\)$"):
        edit(agent_make(), operation="delete", content="x")


def test_over_learned_max_chars_is_refused_and_changes_nothing() -> None:
    agent = agent_make(learned="12345", learned_version=1)
    with pytest.raises(AgentKnowledgeError, match=r"11 characters, over its limit of 10 .*learned_max_chars"):
        edit(agent, max_chars=10, operation="append", content="678901")
    assert learned(agent) == ("12345", 1)
    assert versions(agent, "learned") == []


def test_exactly_learned_max_chars_is_accepted() -> None:
    agent = agent_make(learned="12345")
    edit(agent, max_chars=10, operation="append", content="67890")
    assert learned(agent) == ("1234567890", 1)


def test_an_edit_without_a_session_announces_nothing_and_names_its_author() -> None:
    agent = agent_make()
    other = agent_session_make(agent)
    edit(agent, operation="append", content="x")
    assert versions(agent, "learned") == [(1, "x", False, "operator:ann")]
    assert agent_events(other) == []


def test_write_replaces_the_whole_text_as_a_new_version() -> None:
    agent = agent_make(learned="old", learned_version=1)
    services.agent_learned_write(agent_id=agent.pk, content="new", author="operator:ann", max_chars=MAX)
    assert learned(agent) == ("new", 2)


def test_a_stale_expected_version_conflicts_with_the_current_text() -> None:
    agent = agent_make(learned="now", learned_version=4)
    with pytest.raises(services.AgentLearnedConflict) as caught:
        services.agent_learned_write(
            agent_id=agent.pk, content="mine", author="operator:ann", max_chars=MAX, expected_version=3
        )
    assert (caught.value.content, caught.value.version) == ("now", 4)
    assert learned(agent) == ("now", 4)


def test_an_agent_that_no_longer_exists_is_an_error() -> None:
    agent = agent_make()
    agent_id = agent.pk
    agent.delete()
    with pytest.raises(AgentKnowledgeError, match="no longer exists"):
        services.agent_learned_write(agent_id=agent_id, content="x", author="operator:ann", max_chars=MAX)
