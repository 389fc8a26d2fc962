"""Every change of an agent's MCP servers (DESIGN.md, MCP). Operators' data only: each service
takes an `operator:<username>` author and refuses any other (a model, a session, a client), so
that nothing but the dashboard and the admin can make the service run a command. A change is
not a version (a configuration holds secrets, which no history keeps) and no session event: the
agent's sessions are offered the servers' tools from their next model call."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from sessions_app.agent_mcp_rules import MCP_SERVERS_MAX, McpConfigError, mcp_server_config_clean
from sessions_app.authors import OPERATOR_AUTHOR_PREFIX
from sessions_app.models import Agent, AgentMcpServer


def _operator_only(author: str) -> None:
    if not author.startswith(OPERATOR_AUTHOR_PREFIX):
        raise McpConfigError("Only an operator configures MCP servers; nothing was changed.")


def _agent_lock(agent_id: int) -> Agent:
    agent = Agent.objects.select_for_update().only("id").filter(pk=agent_id).first()
    if agent is None:
        raise McpConfigError("This agent no longer exists, so nothing was changed.")
    return agent


def agent_mcp_server_set(
    *, agent_id: int, name: str, config: Any, enabled: bool = True, author: str
) -> AgentMcpServer:
    """Attach the server `name` to the agent, or replace its configuration and switch, after
    checking `config` (`agent_mcp_rules.mcp_server_config_clean`). Raises `McpConfigError`
    (nothing changed) for a bad configuration, a non-operator author, a missing agent or one
    server over `MCP_SERVERS_MAX`. Returns the row."""
    _operator_only(author)
    checked = mcp_server_config_clean(name, config)
    with transaction.atomic():
        _agent_lock(agent_id)
        row = AgentMcpServer.objects.select_for_update().filter(agent_id=agent_id, name=name).first()
        if row is None:
            if AgentMcpServer.objects.filter(agent_id=agent_id).count() >= MCP_SERVERS_MAX:
                raise McpConfigError(
                    f"An agent has at most {MCP_SERVERS_MAX} MCP servers; nothing was added."
                )
            return AgentMcpServer.objects.create(
                agent_id=agent_id, name=name, config=checked.as_json(), enabled=enabled, author=author
            )
        row.config, row.enabled, row.author, row.updated_at = (
            checked.as_json(),
            enabled,
            author,
            timezone.now(),
        )
        row.save(update_fields=["config", "enabled", "author", "updated_at"])
        return row


def agent_mcp_server_remove(*, agent_id: int, name: str, author: str) -> bool:
    """Detach the server `name` from the agent; whether it was attached. `McpConfigError` for a
    non-operator author."""
    _operator_only(author)
    with transaction.atomic():
        deleted, _ = AgentMcpServer.objects.filter(agent_id=agent_id, name=name).delete()
    return bool(deleted)
