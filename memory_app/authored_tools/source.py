"""The agent's authored tools as the engine offers them (`Feature.tool_source`): each enabled
tool a `ToolSpec` with its own name, description and input schema, so the engine checks a call's
input against the schema before the sandbox starts. Read for every request (in a DB thread): a
definition reaches every session of the agent from its next model call, never pinned."""

from __future__ import annotations

from typing import Any

from memory_app.authored_tools.runner import authored_tool_call
from memory_app.authored_tools.settings import tool_authoring
from sessions_app.agent_knowledge_selectors import ToolView, agent_tools_list
from sessions_app.engine.contract import Handler, SessionSnapshot, ToolContext, ToolSpec


def _handler(tool: ToolView) -> Handler:
    async def handler(ctx: ToolContext, tool_input: dict) -> Any:
        return await authored_tool_call(ctx, name=tool.name, code=tool.code, args=tool_input)

    return handler


def authored_tools(session: SessionSnapshot) -> list[ToolSpec]:
    """The session's agent's enabled tools (none where authoring is off for the session)."""
    if not tool_authoring(session) or session.agent_id is None:
        return []
    return [
        ToolSpec(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            handler=_handler(tool),
        )
        for tool in agent_tools_list(agent_id=session.agent_id, enabled_only=True)
    ]
