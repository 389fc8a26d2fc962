"""`define_tool` and `remove_tool` (DESIGN.md, "Agent-authored tools").

Offered where `settings.tool_authoring` says (an agent, the sandbox on, `knowledge.tool_authoring`);
a call where they are not offered gets a refusal saying why. The changes are made by the agent's
services under the agent's row lock, each a version, announced with `agent.updated` (part `tool`)
on this session; every misuse (a bad name, a name one of the session's tools has, a schema the
input check does not cover, code that does not compile or defines no `run(args, session)`, too
many tools) is a `ToolError` the model can act on, and nothing is stored.
"""

from __future__ import annotations

from memory_app.authored_tools import prompts
from memory_app.authored_tools.settings import tool_authoring
from memory_app.knowledge.settings import has_agent
from memory_app.knowledge.tools import result_with_note
from sessions_app import services
from sessions_app.agent_knowledge_rules import (
    TOOL_CODE_MAX_BYTES,
    TOOL_DESCRIPTION_MAX_CHARS,
    TOOL_NAME_MAX_CHARS,
    AgentKnowledgeError,
)
from sessions_app.authors import agent_session_author
from sessions_app.common.db import db
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec

NAME_LIMIT = TextLimit(chars=TOOL_NAME_MAX_CHARS, name="TOOL_NAME_MAX_CHARS")
DESCRIPTION_LIMIT = TextLimit(chars=TOOL_DESCRIPTION_MAX_CHARS, name="TOOL_DESCRIPTION_MAX_CHARS")
# A character is at least one byte: the rules then count the UTF-8 bytes.
CODE_LIMIT = TextLimit(chars=TOOL_CODE_MAX_BYTES, name="TOOL_CODE_MAX_BYTES")


def _agent_id(ctx: ToolContext) -> int:
    if ctx.session.agent_id is None:  # offered only with an agent; a stale call still lands here
        raise ToolError(prompts.NO_AGENT)
    return ctx.session.agent_id


async def define_tool(ctx: ToolContext, tool_input: dict) -> list[dict[str, str]]:
    # Shadowing: every static tool of the process (offered here or not) and this session's client
    # tools. Another session's client tool of the same name wins there (the engine leaves it out).
    reserved = set(ctx.server_tool_names) | {t["name"] for t in ctx.session.client_tools}
    try:
        row = await db(services.agent_tool_define)(
            agent_id=_agent_id(ctx),
            name=tool_input["name"],
            description=tool_input["description"],
            input_schema=tool_input["input_schema"],
            code=tool_input["code"],
            author=agent_session_author(ctx.session.id),
            reserved_names=reserved,
            session_id=ctx.session.id,
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return result_with_note({"ok": True, "version": row.version}, prompts.DEFINED_NOTE)


async def remove_tool(ctx: ToolContext, tool_input: dict) -> list[dict[str, str]]:
    try:
        await db(services.agent_tool_remove)(
            agent_id=_agent_id(ctx),
            name=tool_input["name"],
            author=agent_session_author(ctx.session.id),
            session_id=ctx.session.id,
        )
    except AgentKnowledgeError as exc:
        raise ToolError(str(exc)) from exc
    return result_with_note({"ok": True}, prompts.REMOVED_NOTE)


def _refusal(session: SessionSnapshot) -> str:
    return prompts.NOT_OFFERED if has_agent(session) else prompts.NO_AGENT


DEFINE_TOOL = ToolSpec(
    name=prompts.DEFINE_TOOL,
    description=prompts.DEFINE_TOOL_DESCRIPTION,
    input_schema=prompts.DEFINE_TOOL_SCHEMA,
    handler=define_tool,
    enabled=tool_authoring,
    refusal=_refusal,
    text_limits={"name": NAME_LIMIT, "description": DESCRIPTION_LIMIT, "code": CODE_LIMIT},
)
REMOVE_TOOL = ToolSpec(
    name=prompts.REMOVE_TOOL,
    description=prompts.REMOVE_TOOL_DESCRIPTION,
    input_schema=prompts.REMOVE_TOOL_SCHEMA,
    handler=remove_tool,
    enabled=tool_authoring,
    refusal=_refusal,
    text_limits={"name": NAME_LIMIT},
)
TOOLS = [DEFINE_TOOL, REMOVE_TOOL]
