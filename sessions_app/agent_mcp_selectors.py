"""Reads of an agent's MCP servers (DESIGN.md, MCP): what its sessions are offered, and what the
dashboard and the admin show (never a configuration's env values: `agent_mcp_rules.mcp_config_masked`)."""

from __future__ import annotations

from sessions_app.agent_mcp_rules import McpConfigError, McpServerConfig, mcp_server_config_clean
from sessions_app.models import AgentMcpServer


def agent_mcp_servers(*, agent_id: int) -> list[AgentMcpServer]:
    """Every server attached to the agent, by name (enabled or not)."""
    return list(AgentMcpServer.objects.filter(agent_id=agent_id).order_by("name"))


def agent_mcp_configs(*, agent_id: int) -> tuple[McpServerConfig, ...]:
    """The checked configurations of the agent's enabled servers, by name. A stored one that no
    longer passes the rules (written before a rule was added) is left out."""
    configs = []
    rows = AgentMcpServer.objects.filter(agent_id=agent_id, enabled=True).order_by("name")
    for name, config in rows.values_list("name", "config"):
        try:
            configs.append(mcp_server_config_clean(name, config))
        except McpConfigError:
            continue
    return tuple(configs)
