"""Agents as core data (DESIGN.md, "Agents"): every change a version with its author, restores as
new versions, the admin through the same services."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app import agent_selectors, services
from sessions_app.engine import agents as engine_agents
from sessions_app.models import Agent, AgentVersion
from sessions_app.validation import SpecError

pytestmark = pytest.mark.django_db


def versions(agent: Agent, part: str) -> list[tuple[int, str, str, int | None]]:
    return list(
        AgentVersion.objects.filter(agent=agent, part=part)
        .order_by("version")
        .values_list("version", "content", "author", "restored_from")
    )


def test_instructions_changes_are_versions_and_a_restore_is_a_new_one() -> None:
    agent = engine_agents.agent_create(
        owner_name="cli", name="auditor", system_prompt="v1", author="client:cli"
    )
    services.agent_instructions_set(agent_id=agent.pk, instructions="v2", author="operator:alice")
    services.agent_instructions_set(
        agent_id=agent.pk, instructions="v2", author="operator:alice"
    )  # no change
    services.agent_version_restore(agent_id=agent.pk, part="instructions", version=1, author="operator:bob")
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("v1", 3)
    assert versions(agent, "instructions") == [
        (1, "v1", "client:cli", None),
        (2, "v2", "operator:alice", None),
        (3, "v1", "operator:bob", 1),
    ]


def test_restoring_a_version_that_does_not_exist_changes_nothing() -> None:
    agent = engine_agents.agent_create(owner_name="cli", name="auditor", author="client:cli")
    with pytest.raises(services.AgentVersionNotFound):
        services.agent_version_restore(agent_id=agent.pk, part="instructions", version=9, author="operator:x")
    with pytest.raises(services.AgentVersionNotFound):
        services.agent_version_restore(agent_id=agent.pk, part="skill", version=1, author="operator:x")
    agent.refresh_from_db()
    assert agent.instructions_version == 1 and AgentVersion.objects.count() == 1


def test_names_are_unique_per_owner_only() -> None:
    engine_agents.agent_create(owner_name="alice", name="auditor", author="client:alice")
    engine_agents.agent_create(owner_name="bob", name="auditor", author="client:bob")
    with pytest.raises(services.AgentExists):
        engine_agents.agent_create(owner_name="alice", name="auditor", author="client:alice")
    assert agent_selectors.agent_get(owner_name="bob", name="auditor").owner_name == "bob"
    with pytest.raises(agent_selectors.AgentNotFound):
        agent_selectors.agent_get(owner_name="carol", name="auditor")


@pytest.mark.parametrize("name", ["", "UPPER", "has space", "dot.ted", "x" * 65])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(SpecError) as refused:
        engine_agents.agent_create(owner_name="cli", name=name, author="client:cli")
    assert refused.value.code == "invalid_value"
    assert not Agent.objects.exists()


def test_the_admin_creates_an_agent_checked_and_changes_its_instructions_as_a_version(
    admin_client: Client,
) -> None:
    add = reverse("admin:sessions_app_agent_add")
    bad = admin_client.post(
        add, {"owner_name": "", "name": "Bad Name", "instructions": "", "model": "", "settings": "{}"}
    )
    assert bad.status_code == 200 and not Agent.objects.exists()
    assert "lowercase letters" in bad.content.decode()
    made = admin_client.post(
        add, {"owner_name": "", "name": "ops-helper", "instructions": "Help.", "model": "", "settings": "{}"}
    )
    assert made.status_code == 302
    agent = Agent.objects.get(name="ops-helper")
    change = reverse("admin:sessions_app_agent_change", args=[agent.pk])
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"instructions": "Help more."}).status_code == 302
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("Help more.", 2)
    assert versions(agent, "instructions")[-1][2] == "operator:admin"
    for model in ("agentversion", "agentskill", "agentstateentry"):
        assert admin_client.get(reverse(f"admin:sessions_app_{model}_changelist")).status_code == 200


def test_a_child_of_an_agents_session_is_one_of_the_agents_sessions_too() -> None:
    from memory_app.subsessions import services as subsession_services
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.engine.features import features

    agent = engine_agents.agent_create(owner_name="", name="auditor", system_prompt="You audit.", author="x")
    parent = engine_sessions.session_create(owner=None, agent=agent)
    for mode in (subsession_services.MODE_SPAWN, subsession_services.MODE_FORK):
        child = subsession_services.subsession_create(
            parent_id=parent.pk,
            tool_use_id=f"toolu_{mode}",
            mode=mode,
            task="Side work.",
            settings_defaults=features().default_settings,
        )
        assert child.agent_id == agent.pk


def test_instructions_set_with_a_stale_expected_version_changes_nothing() -> None:
    agent = engine_agents.agent_create(
        owner_name="cli", name="auditor", system_prompt="v1", author="client:cli"
    )
    services.agent_instructions_set(agent_id=agent.pk, instructions="v2", author="client:cli")
    with pytest.raises(services.AgentTextConflict) as caught:
        services.agent_instructions_set(
            agent_id=agent.pk, instructions="mine", author="operator:alice", expected_version=1
        )
    assert (caught.value.version, caught.value.text, caught.value.part) == (2, "v2", "instructions")
    services.agent_instructions_set(
        agent_id=agent.pk, instructions="mine", author="operator:alice", expected_version=2
    )
    agent.refresh_from_db()
    assert (agent.instructions, agent.instructions_version) == ("mine", 3)


def test_restore_with_a_stale_expected_version_changes_nothing() -> None:
    agent = engine_agents.agent_create(owner_name="cli", name="auditor", author="client:cli")
    for text in ("one", "two"):
        services.agent_learned_write(agent_id=agent.pk, content=text, author="agent:x", max_chars=100)
    with pytest.raises(services.AgentTextConflict) as caught:
        services.agent_version_restore(
            agent_id=agent.pk, part="learned", version=1, author="operator:bob", expected_version=1
        )
    assert (caught.value.version, caught.value.text) == (2, "two")
    agent.refresh_from_db()
    assert (agent.learned, agent.learned_version) == ("two", 2)
    services.agent_version_restore(
        agent_id=agent.pk, part="learned", version=1, author="operator:bob", expected_version=2
    )
    agent.refresh_from_db()
    assert (agent.learned, agent.learned_version) == ("one", 3)
