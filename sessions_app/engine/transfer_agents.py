"""The agents an imported session names (docs/export.md): the importer's agent of that name, or
one created from the document's copy when it has none (checked as `agent.create` checks an
agent, its skills and tools as the knowledge tools check them)."""

from __future__ import annotations

from typing import Any

from sessions_app import agent_selectors, services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.authors import client_author
from sessions_app.engine.agents import AGENT_NAME_RE, agent_create
from sessions_app.models import Agent, AgentToken
from sessions_app.transfer_rows import DocumentError, list_at
from sessions_app.validation import SpecError


def agent_for(
    name: Any, where: str, *, owner: AgentToken, agents: list[Any], cache: dict[str, int]
) -> int | None:
    """The importer's agent of that name, created from the document's copy when it has none."""
    if name is None:
        return None
    if not isinstance(name, str) or not AGENT_NAME_RE.fullmatch(name):
        raise DocumentError(where, "an agent name is 1-64 characters: lowercase letters, digits, '-' and '_'")
    if name in cache:
        return cache[name]
    try:
        agent = agent_selectors.agent_get(owner_name=owner.name, name=name)
    except agent_selectors.AgentNotFound:
        agent = _agent_from_copy(name, agents, owner=owner)
    cache[name] = agent.pk
    return agent.pk


def _agent_from_copy(name: str, agents: list[Any], *, owner: AgentToken) -> Agent:
    found = [i for i, copy in enumerate(agents) if isinstance(copy, dict) and copy.get("name") == name]
    if not found:
        raise DocumentError("agents", f"the document names the agent {name!r} but holds no copy of it")
    i = found[0]
    copy = agents[i]
    where = f"agents[{i}]"
    author = client_author(owner.name)
    try:
        agent = agent_create(
            owner_name=owner.name,
            name=name,
            system_prompt=copy.get("instructions", ""),
            model=copy.get("model") or None,
            settings=copy.get("settings") or {},
            author=author,
        )
        learned = copy.get("learned", "")
        if learned:
            if not isinstance(learned, str):
                raise DocumentError(f"{where}.learned", "must be a string")
            services.agent_learned_write(
                agent_id=agent.pk, content=learned, author=author, max_chars=len(learned)
            )
        skills = list_at(copy, "skills", where)
        for j, skill in enumerate(skills):
            if not isinstance(skill, dict):
                raise DocumentError(f"{where}.skills[{j}]", "must be an object")
            services.agent_skill_write(
                agent_id=agent.pk,
                name=skill.get("name"),  # type: ignore[arg-type]
                description=skill.get("description"),  # type: ignore[arg-type]
                content=skill.get("content", ""),
                author=author,
                max_skills=len(skills),
            )
        for j, tool in enumerate(list_at(copy, "tools", where)):
            if not isinstance(tool, dict):
                raise DocumentError(f"{where}.tools[{j}]", "must be an object")
            row = services.agent_tool_define(
                agent_id=agent.pk,
                name=tool.get("name"),  # type: ignore[arg-type]
                description=tool.get("description"),  # type: ignore[arg-type]
                input_schema=tool.get("input_schema"),
                code=tool.get("code"),  # type: ignore[arg-type]
                author=author,
            )
            if tool.get("enabled") is False:
                services.agent_tool_enable(agent_id=agent.pk, name=row.name, enabled=False, author=author)
    except (SpecError, AgentKnowledgeError, TypeError) as exc:
        raise DocumentError(where, str(getattr(exc, "message", exc))) from None
    return agent
