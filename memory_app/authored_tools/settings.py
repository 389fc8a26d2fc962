"""When a session may define and use authored tools: it has an agent, the code sandbox is on
(the server allows it and `sandbox.enabled`), and `knowledge.tool_authoring` (the knowledge
feature's setting, default true). One rule for `define_tool`, `remove_tool` and the tools."""

from __future__ import annotations

from memory_app.knowledge.settings import has_agent
from memory_app.sandbox.tools import sandbox_enabled
from sessions_app.engine.contract import SessionSnapshot


def tool_authoring(session: SessionSnapshot) -> bool:
    return (
        has_agent(session)
        and bool(session.setting("knowledge", "tool_authoring"))
        and sandbox_enabled(session)
    )
