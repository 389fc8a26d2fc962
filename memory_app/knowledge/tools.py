"""The agent's knowledge tools (DESIGN.md, "Agents"): `edit_system_prompt`, `read_skill`,
`write_skill`, `delete_skill`, `agent_state`.

Offered only to a session that has an agent (`edit_system_prompt` also needs
`knowledge.learned_editable`, `write_skill` and `delete_skill` `knowledge.skills_writable`); a
call where one is not offered gets a refusal saying why. Every misuse is a `ToolError` the model
can act on, and changes nothing. The changes are made by the agent's services, under the agent's
row lock, each announced with `agent.updated` on this session.
"""

from __future__ import annotations

import json
from typing import Any

from memory_app.knowledge import prompts
from memory_app.knowledge.settings import (
    has_agent,
    learned_editable,
    refresh_immediate,
    skills_writable,
)
from sessions_app import agent_knowledge_selectors as selectors
from sessions_app import services
from sessions_app.agent_knowledge_rules import (
    SKILL_CONTENT_MAX_CHARS,
    SKILL_DESCRIPTION_MAX_CHARS,
    SKILL_NAME_MAX_CHARS,
    STATE_KEY_MAX_CHARS,
    AgentKnowledgeError,
)
from sessions_app.authors import agent_session_author
from sessions_app.common.db import db
from sessions_app.common.text_edits import TextEdit
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec

OK: dict[str, Any] = {"ok": True}

LEARNED_TEXT_LIMIT = TextLimit(setting=("knowledge", "learned_max_chars"))
SKILL_NAME_LIMIT = TextLimit(chars=SKILL_NAME_MAX_CHARS, name="SKILL_NAME_MAX_CHARS")
SKILL_DESCRIPTION_LIMIT = TextLimit(chars=SKILL_DESCRIPTION_MAX_CHARS, name="SKILL_DESCRIPTION_MAX_CHARS")
SKILL_CONTENT_LIMIT = TextLimit(chars=SKILL_CONTENT_MAX_CHARS, name="SKILL_CONTENT_MAX_CHARS")
STATE_KEY_LIMIT = TextLimit(chars=STATE_KEY_MAX_CHARS, name="STATE_KEY_MAX_CHARS")


def _agent_id(ctx: ToolContext) -> int:
    if ctx.session.agent_id is None:  # offered only with an agent; a stale call still lands here
        raise ToolError(prompts.NO_AGENT)
    return ctx.session.agent_id


def result_with_note(result: dict[str, Any], note: str) -> list[dict[str, str]]:
    """The result's JSON, then what the model should know about when the change takes effect."""
    return [
        {"type": "text", "text": json.dumps(result, ensure_ascii=False)},
        {"type": "text", "text": note},
    ]


def _takes_effect(session: SessionSnapshot) -> str:
    return prompts.TAKES_EFFECT_NOW if refresh_immediate(session) else prompts.TAKES_EFFECT_AT_COMPACTION


async def edit_system_prompt(ctx: ToolContext, tool_input: dict) -> list[dict[str, str]]:
    edit = TextEdit(
        operation=tool_input["operation"],
        content=tool_input.get("content"),
        find=tool_input.get("find"),
        replace=tool_input.get("replace"),
        replace_all=bool(tool_input.get("replace_all")),
    )
    try:
        row = await db(services.agent_learned_update)(
            agent_id=_agent_id(ctx),
            edit=edit,
            author=agent_session_author(ctx.session.id),
            max_chars=int(ctx.session.setting("knowledge", "learned_max_chars")),
            session_id=ctx.session.id,
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return result_with_note({"ok": True, "version": row.version}, _takes_effect(ctx.session))


async def read_skill(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    try:
        skill = await db(selectors.agent_skill_get)(agent_id=_agent_id(ctx), name=tool_input["name"])
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return {"name": skill.name, "description": skill.description, "content": skill.content}


async def write_skill(ctx: ToolContext, tool_input: dict) -> list[dict[str, str]]:
    try:
        row = await db(services.agent_skill_write)(
            agent_id=_agent_id(ctx),
            name=tool_input["name"],
            description=tool_input["description"],
            content=tool_input["content"],
            author=agent_session_author(ctx.session.id),
            max_skills=int(ctx.session.setting("knowledge", "max_skills")),
            session_id=ctx.session.id,
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    note = _takes_effect(ctx.session) + prompts.SKILL_READABLE_NOW
    return result_with_note({"ok": True, "version": row.version}, note)


async def delete_skill(ctx: ToolContext, tool_input: dict) -> list[dict[str, str]]:
    try:
        await db(services.agent_skill_delete)(
            agent_id=_agent_id(ctx),
            name=tool_input["name"],
            author=agent_session_author(ctx.session.id),
            session_id=ctx.session.id,
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return result_with_note(OK, _takes_effect(ctx.session))


def _state_needs(tool_input: dict, field: str, action: str) -> Any:
    if field not in tool_input:
        raise ToolError(f'agent_state with action "{action}" needs "{field}".')
    return tool_input[field]


async def agent_state(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    agent_id, action = _agent_id(ctx), tool_input["action"]
    try:
        if action == "list":
            keys = await db(selectors.agent_state_keys)(
                agent_id=agent_id, prefix=tool_input.get("prefix") or ""
            )
            return {"keys": keys}
        key = _state_needs(tool_input, "key", action)
        if action == "get":
            entry = await db(selectors.agent_state_get)(agent_id=agent_id, key=key)
            return {"key": entry.key, "value": entry.value, "version": entry.version}
        author = agent_session_author(ctx.session.id)
        if action == "set":
            # A null value is a value (JSON null) when the call names the field at all.
            row = await db(services.agent_state_set)(
                agent_id=agent_id,
                key=key,
                value=_state_needs(tool_input, "value", action),
                author=author,
                expected_version=tool_input.get("expected_version"),
                session_id=ctx.session.id,
            )
            return {"ok": True, "version": row.version}
        await db(services.agent_state_delete)(
            agent_id=agent_id, key=key, author=author, session_id=ctx.session.id
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return OK


def _refusal(offered: str) -> Any:
    def refusal(session: SessionSnapshot) -> str:
        return offered if has_agent(session) else prompts.NO_AGENT

    return refusal


EDIT_SYSTEM_PROMPT = ToolSpec(
    name=prompts.EDIT_SYSTEM_PROMPT,
    description=prompts.EDIT_SYSTEM_PROMPT_DESCRIPTION,
    input_schema=prompts.EDIT_SYSTEM_PROMPT_SCHEMA,
    handler=edit_system_prompt,
    enabled=learned_editable,
    refusal=_refusal(prompts.LEARNED_NOT_EDITABLE),
    text_limits={"content": LEARNED_TEXT_LIMIT, "find": LEARNED_TEXT_LIMIT, "replace": LEARNED_TEXT_LIMIT},
)
READ_SKILL = ToolSpec(
    name=prompts.READ_SKILL,
    description=prompts.READ_SKILL_DESCRIPTION,
    input_schema=prompts.READ_SKILL_SCHEMA,
    handler=read_skill,
    enabled=has_agent,
    refusal=_refusal(prompts.NO_AGENT),
    text_limits={"name": SKILL_NAME_LIMIT},
)
WRITE_SKILL = ToolSpec(
    name=prompts.WRITE_SKILL,
    description=prompts.WRITE_SKILL_DESCRIPTION,
    input_schema=prompts.WRITE_SKILL_SCHEMA,
    handler=write_skill,
    enabled=skills_writable,
    refusal=_refusal(prompts.SKILLS_NOT_WRITABLE),
    text_limits={
        "name": SKILL_NAME_LIMIT,
        "description": SKILL_DESCRIPTION_LIMIT,
        "content": SKILL_CONTENT_LIMIT,
    },
)
DELETE_SKILL = ToolSpec(
    name=prompts.DELETE_SKILL,
    description=prompts.DELETE_SKILL_DESCRIPTION,
    input_schema=prompts.DELETE_SKILL_SCHEMA,
    handler=delete_skill,
    enabled=skills_writable,
    refusal=_refusal(prompts.SKILLS_NOT_WRITABLE),
    text_limits={"name": SKILL_NAME_LIMIT},
)
AGENT_STATE = ToolSpec(
    name=prompts.AGENT_STATE,
    description=prompts.AGENT_STATE_DESCRIPTION,
    input_schema=prompts.AGENT_STATE_SCHEMA,
    handler=agent_state,
    enabled=has_agent,
    refusal=_refusal(prompts.NO_AGENT),
    text_limits={"key": STATE_KEY_LIMIT, "prefix": STATE_KEY_LIMIT},
)
TOOLS = [EDIT_SYSTEM_PROMPT, READ_SKILL, WRITE_SKILL, DELETE_SKILL, AGENT_STATE]
