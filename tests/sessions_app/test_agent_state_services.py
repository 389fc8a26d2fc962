"""An agent's state (`agent_state`): set, get, delete, list, compare-and-set, the limits, and
`agent.updated`."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app import agent_knowledge_selectors as selectors
from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError, AgentStateConflict
from sessions_app.agent_models import Agent, AgentStateEntry
from tests.sessions_app.agent_knowledge_support import agent_events, agent_make, agent_session_make

pytestmark = pytest.mark.django_db


def put(agent: Agent, key: str, value: Any, **more: Any) -> AgentStateEntry:
    return services.agent_state_set(agent_id=agent.pk, key=key, value=value, author="operator:ann", **more)


def test_set_then_get_returns_the_value_and_version_one() -> None:
    agent = agent_make()
    put(agent, "prefs", {"units": "metric", "n": [1, 2]})
    assert selectors.agent_state_get(agent_id=agent.pk, key="prefs") == selectors.StateView(
        "prefs", {"units": "metric", "n": [1, 2]}, 1
    )


@pytest.mark.parametrize("value", [None, 0, "", [], {}, "text", 1.5, True])
def test_any_json_value_is_kept(value: Any) -> None:
    agent = agent_make()
    put(agent, "k", value)
    assert selectors.agent_state_get(agent_id=agent.pk, key="k").value == value


def test_each_set_raises_the_version_and_announces_it_on_the_session() -> None:
    agent = agent_make()
    session = agent_session_make(agent)
    author = f"agent:{session.id}"
    for value in ("a", "b"):
        services.agent_state_set(
            agent_id=agent.pk, key="k", value=value, author=author, session_id=session.id
        )
    assert [(e["part"], e["name"], e["version"]) for e in agent_events(session)] == [
        ("state", "k", 1),
        ("state", "k", 2),
    ]
    assert agent_events(session)[0] == {
        "agent": "helper",
        "part": "state",
        "name": "k",
        "version": 1,
        "author": author,
    }


def test_get_of_a_missing_key_is_an_error() -> None:
    with pytest.raises(AgentKnowledgeError, match='no key "missing"'):
        selectors.agent_state_get(agent_id=agent_make().pk, key="missing")


def test_expected_version_sets_only_at_that_version() -> None:
    agent = agent_make()
    put(agent, "k", "a")
    assert put(agent, "k", "b", expected_version=1).version == 2
    with pytest.raises(AgentStateConflict, match='"k" is at version 2, not version 1') as caught:
        put(agent, "k", "c", expected_version=1)
    assert caught.value.version == 2
    assert selectors.agent_state_get(agent_id=agent.pk, key="k") == selectors.StateView("k", "b", 2)


def test_expected_version_zero_creates_only_a_missing_key() -> None:
    agent = agent_make()
    assert put(agent, "k", "a", expected_version=0).version == 1
    with pytest.raises(AgentStateConflict):
        put(agent, "k", "b", expected_version=0)
    with pytest.raises(AgentStateConflict, match="does not exist"):
        put(agent, "other", "b", expected_version=3)
    assert selectors.agent_state_keys(agent_id=agent.pk) == ["k"]


def test_delete_removes_the_key_and_announces_a_null_version() -> None:
    agent = agent_make()
    session = agent_session_make(agent)
    put(agent, "k", "a")
    services.agent_state_delete(agent_id=agent.pk, key="k", author="operator:ann", session_id=session.id)
    assert selectors.agent_state_keys(agent_id=agent.pk) == []
    assert agent_events(session)[-1]["version"] is None


def test_delete_of_a_missing_key_is_an_error() -> None:
    with pytest.raises(AgentKnowledgeError, match='no key "k"'):
        services.agent_state_delete(agent_id=agent_make().pk, key="k", author="operator:ann")


def test_list_is_sorted_by_code_point_case_sensitive_and_filtered_by_prefix() -> None:
    agent = agent_make()
    for key in ("b", "a/2", "A/1", "a/1", "ab"):
        put(agent, key, 1)
    assert selectors.agent_state_keys(agent_id=agent.pk) == ["A/1", "a/1", "a/2", "ab", "b"]
    assert selectors.agent_state_keys(agent_id=agent.pk, prefix="a/") == ["a/1", "a/2"]


def test_list_returns_at_most_200_keys() -> None:
    agent = agent_make()
    AgentStateEntry.objects.bulk_create(
        AgentStateEntry(agent=agent, key=f"k{i:03}", value=i, version=1, author="x") for i in range(250)
    )
    keys = selectors.agent_state_keys(agent_id=agent.pk)
    assert (len(keys), keys[0], keys[-1]) == (200, "k000", "k199")


@pytest.mark.parametrize(
    ("key", "message"), [("", "needs a"), ("k" * 201, "201 characters long; at most 200")]
)
def test_a_bad_key_is_refused(key: str, message: str) -> None:
    agent = agent_make()
    with pytest.raises(AgentKnowledgeError, match=message):
        put(agent, key, 1)
    assert selectors.agent_state_keys(agent_id=agent.pk) == []


def test_the_longest_key_is_accepted() -> None:
    assert put(agent_make(), "k" * 200, 1).version == 1


def test_a_value_over_65536_bytes_of_json_is_refused_and_one_of_exactly_that_is_kept() -> None:
    agent = agent_make()
    with pytest.raises(AgentKnowledgeError, match="65,537 bytes"):
        put(agent, "k", "x" * 65_535)  # two quotes make it 65,537
    assert put(agent, "k", "x" * 65_534).version == 1
    # Bytes, not characters: "é" is two bytes of UTF-8.
    with pytest.raises(AgentKnowledgeError, match="bytes of JSON"):
        put(agent, "k", "é" * 32_768)  # 32,768 characters, 65,538 bytes


def test_a_value_that_is_not_json_is_refused() -> None:
    with pytest.raises(AgentKnowledgeError, match="not JSON"):
        put(agent_make(), "k", float("nan"))


def test_a_new_key_past_1000_keys_is_refused_but_setting_an_existing_one_is_not() -> None:
    agent = agent_make()
    AgentStateEntry.objects.bulk_create(
        AgentStateEntry(agent=agent, key=f"k{i}", value=i, version=1, author="x") for i in range(1000)
    )
    with pytest.raises(AgentKnowledgeError, match="already holds 1,000 keys"):
        put(agent, "new", 1)
    assert put(agent, "k5", "again").version == 2


def test_state_is_per_agent() -> None:
    mine, theirs = agent_make(), agent_make(owner_name="other")
    put(mine, "k", 1)
    assert selectors.agent_state_keys(agent_id=theirs.pk) == []


def test_a_delete_with_a_stale_expected_version_deletes_nothing() -> None:
    agent = Agent.objects.create(owner_name="c", name="stale-delete")
    services.agent_state_set(agent_id=agent.pk, key="k", value=1, author="a")
    services.agent_state_set(agent_id=agent.pk, key="k", value=2, author="a")
    with pytest.raises(AgentStateConflict) as caught:
        services.agent_state_delete(agent_id=agent.pk, key="k", author="operator:o", expected_version=1)
    assert caught.value.version == 2
    assert AgentStateEntry.objects.get(agent=agent, key="k").value == 2
    services.agent_state_delete(agent_id=agent.pk, key="k", author="operator:o", expected_version=2)
    assert not AgentStateEntry.objects.filter(agent=agent).exists()
