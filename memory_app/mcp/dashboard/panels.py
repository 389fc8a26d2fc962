"""The MCP part of an agent's page: every server its sessions use (the service's, then the
agent's), each with its status in this process (starting, running, failed with the last error,
stopped), its tools and the names they are offered under. A configuration is shown with its
env values masked. Reading the part starts a server not started yet (without waiting for it)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from memory_app.mcp.manager import SERVICE_SCOPE, agent_scope, mcp_manager
from memory_app.mcp.names import mcp_tool_name
from memory_app.mcp.server import ServerStatus
from memory_app.mcp.source import service_configs
from sessions_app.agent_mcp_rules import (
    McpConfigError,
    McpServerConfig,
    mcp_config_masked,
    mcp_server_config_clean,
)
from sessions_app.agent_mcp_selectors import agent_mcp_servers
from sessions_app.engine.contract import PANEL_AGENT, DashboardPanel

TEMPLATE = "mcp/agent_servers.html"


@dataclass(frozen=True)
class ServerRow:
    scope: str  # "service" or "agent"
    name: str
    transport: str
    config: dict[str, Any]  # masked
    enabled: bool
    status: ServerStatus | None  # None: not started in this process (switched off, or invalid)
    tools: list[tuple[str, str, str]]  # (offered name, the server's name, description)
    problem: str = ""  # a stored configuration that no longer passes the rules
    author: str = ""

    @property
    def since(self) -> datetime.datetime | None:
        if self.status is None:
            return None
        return datetime.datetime.fromtimestamp(self.status.since, tz=datetime.UTC)


def _tools(name: str, status: ServerStatus | None) -> list[tuple[str, str, str]]:
    if status is None:
        return []
    return [(mcp_tool_name(name, t.name), t.name, t.description) for t in status.tools]


def servers_context(agent: Any) -> dict[str, Any]:
    """The rows of the service's servers and of `agent`'s (an `Agent` row)."""
    service = service_configs()
    stored = agent_mcp_servers(agent_id=agent.pk)
    agent_configs: list[McpServerConfig] = []
    checked: dict[str, McpServerConfig | str] = {}
    for row in stored:
        try:
            checked[row.name] = mcp_server_config_clean(row.name, row.config)
        except McpConfigError as exc:
            checked[row.name] = str(exc)
    agent_configs = [
        config for row in stored if row.enabled and isinstance(config := checked[row.name], McpServerConfig)
    ]
    manager = mcp_manager(create=bool(service or agent_configs))
    statuses: dict[tuple[str, str], ServerStatus] = {}
    if manager is not None:
        for scope, configs in ((SERVICE_SCOPE, service), (agent_scope(agent.pk), agent_configs)):
            for server in manager.servers_sync(scope, configs):
                statuses[(scope, server.config.name)] = server.status
    rows = [
        ServerRow(
            scope="service",
            name=config.name,
            transport=config.transport,
            config=mcp_config_masked(config),
            enabled=True,
            status=(status := statuses.get((SERVICE_SCOPE, config.name))),
            tools=_tools(config.name, status),
        )
        for config in service
    ]
    for row in stored:
        config_or_problem = checked[row.name]
        valid = isinstance(config_or_problem, McpServerConfig)
        status = statuses.get((agent_scope(agent.pk), row.name)) if row.enabled else None
        rows.append(
            ServerRow(
                scope="agent",
                name=row.name,
                transport=config_or_problem.transport
                if isinstance(config_or_problem, McpServerConfig)
                else "",
                config=mcp_config_masked(config_or_problem)
                if isinstance(config_or_problem, McpServerConfig)
                else {},
                enabled=row.enabled,
                status=status,
                tools=_tools(row.name, status),
                problem="" if valid else str(config_or_problem),
                author=row.author,
            )
        )
    return {"mcp_servers": rows, "mcp_service_names": [config.name for config in service]}


PANEL = DashboardPanel(name="mcp_servers", template=TEMPLATE, context=servers_context, place=PANEL_AGENT)
