"""MCP tool servers as the engine sees them: one `Feature` whose `tool_source` offers the tools
of the service's servers and of the session's agent's (docs/mcp.md), and an agent-page panel on
the dashboard (the servers, their tools and status, the agent's editable there)."""

from __future__ import annotations

from memory_app.mcp.dashboard import DASHBOARD
from memory_app.mcp.source import mcp_tools
from sessions_app.engine.contract import Feature

FEATURE = Feature(name="mcp", tool_source=mcp_tools, dashboard=DASHBOARD)
