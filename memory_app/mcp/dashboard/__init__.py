"""What operators see of MCP servers (`FEATURE.dashboard`): a part of each agent's page listing
the service's servers and the agent's, their status and tools (`panels`), and the views that
attach, change and detach the agent's (`views`, `urls`). Nothing else configures a server: no
protocol frame, no tool of a model."""

from __future__ import annotations

from memory_app.mcp.dashboard.panels import PANEL
from sessions_app.engine.contract import FeatureDashboard

DASHBOARD = FeatureDashboard(panels=[PANEL], urls="memory_app.mcp.dashboard.urls")
