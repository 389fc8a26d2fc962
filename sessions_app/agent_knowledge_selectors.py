"""Every read of an agent's knowledge that its tools, the skill files' export and the import's
agent lookup need: the learned text, skills, state, authored tools. (The agent's public state is
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
from sessions_app.agent_models import Agent, AgentPart, AgentSkill, AgentStateEntry, AgentTool, AgentVersion

# How many skill (tool) names an unknown skill's (tool's) error lists.
UNKNOWN_SKILL_LISTED = 50
UNKNOWN_TOOL_LISTED = 50


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


@dataclass(frozen=True)
class ToolView:
    """An authored tool as it is now; `enabled` is the operator's switch."""

    name: str
    description: str
    input_schema: dict
    code: str
    version: int
    enabled: bool


def _tool_view(tool: AgentTool) -> ToolView:
    return ToolView(tool.name, tool.description, tool.input_schema, tool.code, tool.version, tool.enabled)


def agent_tool_unknown_message(*, agent_id: int, name: str) -> str:
    """What the model reads for a tool the agent does not have: the names it does have."""
    known = list(
        AgentTool.objects.filter(agent_id=agent_id)
        .order_by("name")
        .values_list("name", flat=True)[:UNKNOWN_TOOL_LISTED]
    )
    listed = ", ".join(known) if known else "none yet"
    return f'The agent has no tool named "{name}". Its tools: {listed}.'


def agent_tools_list(*, agent_id: int, enabled_only: bool = False) -> list[ToolView]:
    """The agent's authored tools now, sorted by name (only those switched on, with
    `enabled_only`: what its sessions are offered)."""
    tools = AgentTool.objects.filter(agent_id=agent_id)
    if enabled_only:
        tools = tools.filter(enabled=True)
    return [_tool_view(t) for t in tools.order_by("name")]


def agent_tool_get(*, agent_id: int, name: str) -> ToolView:
    """The tool `name` as it is now; `AgentKnowledgeError` (naming the agent's tools) when the
    agent has none of that name."""
    tool = AgentTool.objects.filter(agent_id=agent_id, name=name).first()
    if tool is None:
        raise AgentKnowledgeError(agent_tool_unknown_message(agent_id=agent_id, name=name))
    return _tool_view(tool)


@dataclass(frozen=True)
class ToolVersionView:
    """One version of an authored tool: its code (`content`), description and schema, who made
    it and when, whether it removed the tool or restored an earlier version."""

    version: int
    code: str
    description: str
    input_schema: dict
    author: str
    deleted: bool
    restored_from: int | None
    created_at: Any


def agent_tool_versions(*, agent_id: int, name: str) -> list[ToolVersionView]:
    """Every version of the tool `name`, newest first (a removed tool's too; empty for a name
    the agent never had). The dashboard's history page reads them with line diffs through
    `dashboard.selectors.agent_part_history(part="tool", name=...)`."""
    rows = AgentVersion.objects.filter(agent_id=agent_id, part=AgentPart.TOOL, name=name).order_by("-version")
    return [
        ToolVersionView(
            version=row.version,
            code=row.content,
            description=str((row.extra or {}).get("description", "")),
            input_schema=dict((row.extra or {}).get("input_schema") or {}),
            author=row.author,
            deleted=row.deleted,
            restored_from=row.restored_from,
            created_at=row.created_at,
        )
        for row in rows
    ]
