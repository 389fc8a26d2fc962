"""MCP tool servers as the engine sees them: one `Feature` whose `tool_source` offers the tools
of the service's servers and of the session's agent's (docs/mcp.md), and an agent-page panel on
the dashboard (the servers, their tools and status, the agent's editable there)."""

from __future__ import annotations

from memory_app.mcp.dashboard import DASHBOARD
from memory_app.mcp.names import PREFIX
from memory_app.mcp.source import mcp_ready, mcp_tools
from sessions_app.common.approvals import ALWAYS_ASK
from sessions_app.engine.contract import Feature

# An MCP tool's call waits for an answer unless a setting says otherwise (DESIGN.md: approvals).
FEATURE = Feature(
    name="mcp",
    tool_source=mcp_tools,
    tool_source_ready=mcp_ready,
    dashboard=DASHBOARD,
    approvals={f"{PREFIX}*": ALWAYS_ASK},
)
