"""Every read of an agent's knowledge that its tools, the skill files' export and the import's
agent lookup need: the learned text, skills, state. (The agent's public state is
`sessions_app.selectors`'.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions_app.agent_knowledge_rules import (
    STATE_LIST_MAX_KEYS,
    AgentKnowledgeError,
    skill_name_check,
    state_key_check,
)
from sessions_app.agent_models import Agent, AgentSkill, AgentStateEntry

# How many skill names an unknown skill's error lists.
UNKNOWN_SKILL_LISTED = 50


@dataclass(frozen=True)
class SkillView:
    name: str
    description: str
    content: str
    version: int


@dataclass(frozen=True)
class StateView:
    key: str
    value: Any
    version: int


def agent_learned_get(*, agent_id: int) -> tuple[str, int]:
    """The agent's learned text and its version (0 before the first edit)."""
    row = Agent.objects.filter(pk=agent_id).values("learned", "learned_version").first()
    if row is None:
        raise AgentKnowledgeError("This agent no longer exists.")
    return row["learned"] or "", row["learned_version"]


def agent_skill_unknown_message(*, agent_id: int, name: str) -> str:
    """What the model reads for a skill the agent does not have: the names it does have."""
    known = list(
        AgentSkill.objects.filter(agent_id=agent_id)
        .order_by("name")
        .values_list("name", flat=True)[:UNKNOWN_SKILL_LISTED]
    )
    listed = ", ".join(known) if known else "none yet"
    return f'The agent has no skill named "{name}". Its skills: {listed}.'


def agent_skill_get(*, agent_id: int, name: str) -> SkillView:
    """The skill `name` as it is now; `AgentKnowledgeError` (naming the agent's skills) when
    the agent has none of that name."""
    skill = AgentSkill.objects.filter(agent_id=agent_id, name=skill_name_check(name)).first()
    if skill is None:
        raise AgentKnowledgeError(agent_skill_unknown_message(agent_id=agent_id, name=name))
    return SkillView(skill.name, skill.description, skill.content, skill.version)


def agent_skills_list(*, agent_id: int) -> list[SkillView]:
    """Every skill of the agent, sorted by name."""
    return [
        SkillView(s.name, s.description, s.content, s.version)
        for s in AgentSkill.objects.filter(agent_id=agent_id).order_by("name")
    ]


def agent_state_get(*, agent_id: int, key: str) -> StateView:
    """The entry `key`; `AgentKnowledgeError` for a key that does not exist."""
    key = state_key_check(key)
    entry = AgentStateEntry.objects.filter(agent_id=agent_id, key=key).only("key", "value", "version").first()
    if entry is None:
        raise AgentKnowledgeError(
            f'The agent\'s state has no key "{key}" (list its keys with action "list"; set it with '
            'action "set").'
        )
    return StateView(entry.key, entry.value, entry.version)


def agent_state_keys(*, agent_id: int, prefix: str = "") -> list[str]:
    """The agent's keys that start with `prefix` (case-sensitive), sorted by code point, at most
    `STATE_LIST_MAX_KEYS`. Filtered and sorted here, not by the database: SQLite's LIKE ignores
    case and PostgreSQL sorts by its collation, and an agent holds at most 1,000 keys."""
    keys = AgentStateEntry.objects.filter(agent_id=agent_id).values_list("key", flat=True)
    return sorted(key for key in keys if key.startswith(prefix))[:STATE_LIST_MAX_KEYS]


def agents_named(*, name: str, owner_name: str | None = None) -> list[Agent]:
    """The agents called `name` (of the client `owner_name` when given; "" is the operators'),
    by owner: an operator's command names an agent this way."""
    agents = Agent.objects.filter(name=name)
    if owner_name is not None:
        agents = agents.filter(owner_name=owner_name)
    return list(agents.order_by("owner_name"))
