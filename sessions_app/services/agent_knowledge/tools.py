"""An agent's authored tools (DESIGN.md, "Agent-authored tools"): Python defining
`run(args, session)`, run in the code sandbox. Each definition, removal and restore is a version
(`AgentVersion` part `tool`: `content` the code, `extra` the description and input schema); an
operator's on/off switch is not a version (`AgentTool.enabled`, `switched_by`)."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sessions_app.agent_knowledge_rules import (
    AGENT_TOOLS_MAX,
    AgentKnowledgeError,
    tool_fields_check,
    tool_name_check,
)
from sessions_app.agent_knowledge_selectors import agent_tool_unknown_message
from sessions_app.agent_models import Agent, AgentPart, AgentTool, AgentVersion
from sessions_app.services.agent_knowledge.common import agent_lock, agent_updated_emit


def _tool_next_version(agent_id: int, name: str) -> int:
    # Versions of a name go on after a removal: its earlier versions are kept.
    latest = AgentVersion.objects.filter(agent_id=agent_id, part=AgentPart.TOOL, name=name).aggregate(
        latest=Max("version")
    )["latest"]
    return (latest or 0) + 1


def _tool_store(
    *,
    agent: Agent,
    fields: tuple[str, str, dict[str, Any], str],
    author: str,
    max_tools: int,
    restored_from: int | None = None,
) -> AgentTool:
    """Create or replace one tool of the locked `agent` (the caller holds the lock and the
    transaction) from checked fields: a new version and the tool's row."""
    name, description, input_schema, code = fields
    existing = AgentTool.objects.filter(agent_id=agent.pk, name=name).first()
    if existing is None and AgentTool.objects.filter(agent_id=agent.pk).count() >= max_tools:
        raise AgentKnowledgeError(
            f"The agent already has {max_tools} tools, the most it may have (AGENT_TOOLS_MAX), so "
            f'"{name}" was not defined. Remove a tool it no longer needs (remove_tool), or make one '
            "tool do both jobs."
        )
    version = _tool_next_version(agent.pk, name)
    now = timezone.now()
    AgentVersion.objects.create(
        agent_id=agent.pk,
        part=AgentPart.TOOL,
        name=name,
        version=version,
        content=code,
        extra={"description": description, "input_schema": input_schema},
        author=author,
        restored_from=restored_from,
        created_at=now,
    )
    if existing is None:
        row = AgentTool.objects.create(
            agent_id=agent.pk,
            name=name,
            description=description,
            input_schema=input_schema,
            code=code,
            version=version,
            updated_at=now,
        )
    else:
        existing.description, existing.input_schema, existing.code = description, input_schema, code
        existing.version, existing.updated_at = version, now
        existing.save(update_fields=["description", "input_schema", "code", "version", "updated_at"])
        row = existing
    Agent.objects.filter(pk=agent.pk).update(updated_at=now)
    return row


def agent_tool_define(
    *,
    agent_id: int,
    name: str,
    description: str,
    input_schema: Any,
    code: str,
    author: str,
    reserved_names: Collection[str] = (),
    max_tools: int = AGENT_TOOLS_MAX,
    session_id: uuid.UUID | None = None,
) -> AgentTool:
    """Create the tool `name` or replace it (`define_tool`): a new version either way, and
    `agent.updated` (part `tool`) on `session_id`. Returns the tool's row. `AgentKnowledgeError`
    (nothing written) when a field breaks a rule (`agent_knowledge_rules.tool_fields_check`:
    the name, shadowing one of `reserved_names`, the description, the schema, the code), or for
    a new tool past `max_tools`. A replaced tool keeps its operator's switch."""
    fields = tool_fields_check(
        name=name, description=description, input_schema=input_schema, code=code, reserved=reserved_names
    )
    with transaction.atomic():
        agent = agent_lock(agent_id)
        row = _tool_store(agent=agent, fields=fields, author=author, max_tools=max_tools)
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.TOOL,
            name=row.name,
            version=row.version,
            author=author,
        )
    return row


def agent_tool_remove(
    *, agent_id: int, name: str, author: str, session_id: uuid.UUID | None = None
) -> AgentVersion:
    """Remove the tool `name` (`remove_tool`): its row goes, its versions stay, and a version
    with `deleted` set records who removed it. Returns that version. `AgentKnowledgeError`
    (naming the agent's tools) for a tool the agent does not have."""
    with transaction.atomic():
        agent = agent_lock(agent_id)
        tool = AgentTool.objects.filter(agent_id=agent_id, name=tool_name_check(name)).first()
        if tool is None:
            raise AgentKnowledgeError(agent_tool_unknown_message(agent_id=agent_id, name=name))
        now = timezone.now()
        row = AgentVersion.objects.create(
            agent_id=agent_id,
            part=AgentPart.TOOL,
            name=name,
            version=_tool_next_version(agent_id, name),
            content="",
            extra={"description": tool.description, "input_schema": tool.input_schema},
            deleted=True,
            author=author,
            created_at=now,
        )
        tool.delete()
        Agent.objects.filter(pk=agent_id).update(updated_at=now)
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.TOOL,
            name=name,
            version=row.version,
            author=author,
        )
    return row


def agent_tool_restore(
    *,
    agent_id: int,
    name: str,
    version: int,
    author: str,
    reserved_names: Collection[str] = (),
    max_tools: int = AGENT_TOOLS_MAX,
    expected_version: int | None = None,
    session_id: uuid.UUID | None = None,
) -> AgentTool:
    """The tool `name` as it was at `version` (its code, description and schema), defined again
    as a new version that names it (`restored_from`); a removed tool comes back this way.
    `AgentKnowledgeError` (nothing written) for a version that does not exist or is a removal,
    for fields that no longer keep the rules (a name a built-in took since: `reserved_names`),
    past `max_tools`, or when `expected_version` is given (the version an operator's page showed,
    0: removed) and the tool is at another one now."""
    with transaction.atomic():
        agent = agent_lock(agent_id)
        old = AgentVersion.objects.filter(
            agent_id=agent_id, part=AgentPart.TOOL, name=name, version=version
        ).first()
        if old is None or old.deleted:
            what = "a removal" if old is not None else "not a version of it"
            raise AgentKnowledgeError(
                f'Version {version} of the tool "{name}" is {what}: there is nothing to restore.'
            )
        current = AgentTool.objects.filter(agent_id=agent_id, name=name).values_list("version", flat=True)
        now_at = current.first() or 0
        if expected_version is not None and expected_version != now_at:
            raise AgentKnowledgeError(
                f'The tool "{name}" is at version {now_at} now, not {expected_version}: nothing was '
                "restored. Look at the new version, then restore again."
            )
        extra = old.extra or {}
        fields = tool_fields_check(
            name=name,
            description=extra.get("description"),
            input_schema=extra.get("input_schema"),
            code=old.content,
            reserved=reserved_names,
        )
        row = _tool_store(
            agent=agent, fields=fields, author=author, max_tools=max_tools, restored_from=version
        )
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.TOOL,
            name=row.name,
            version=row.version,
            author=author,
        )
    return row


def agent_tool_enable(*, agent_id: int, name: str, enabled: bool, author: str) -> AgentTool:
    """An operator switches the tool `name` on or off (`author`: `operator:<username>`). Not a
    version: the code, description and schema are unchanged, and the switch is kept across
    definitions. A disabled tool is offered to no session of the agent from its next model call.
    `AgentKnowledgeError` for a tool the agent does not have."""
    with transaction.atomic():
        agent_lock(agent_id)
        tool = AgentTool.objects.select_for_update().filter(agent_id=agent_id, name=name).first()
        if tool is None:
            raise AgentKnowledgeError(agent_tool_unknown_message(agent_id=agent_id, name=name))
        if tool.enabled != enabled:
            tool.enabled, tool.switched_by, tool.updated_at = enabled, author, timezone.now()
            tool.save(update_fields=["enabled", "switched_by", "updated_at"])
    return tool
