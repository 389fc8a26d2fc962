"""The MCP tools a session is offered (`Feature.tool_source`): the tools of the service's servers
(`PALIMPSEST_MCP_SERVERS`), then those of the servers an operator attached to the session's agent,
each as `mcp__<server>__<tool>` with the server's own description and input schema.

Runs in a database thread for every request built: it reads what the manager holds (each
server's last listing) and waits for nothing (the database threads are every session's: a server
slow to start held one for up to `PALIMPSEST_MCP_START_TIMEOUT_SECONDS`). A server's first start
and listing is waited for by `mcp_ready`, the feature's `tool_source_ready`, on the event loop
before the turn's first model call (bounded by `PALIMPSEST_MCP_START_TIMEOUT_SECONDS`): the
turn's first request is then built again with its tools, so it already offers them instead of
changing the tool list (and the cached prefix) one request later. A server
that failed keeps its last listing offered (its calls are tool errors until it runs again), so
a crash does not change the tool list; one that never started offers nothing. A change of a
server's tools reaches the session's next model call (one rewrite of the prompt cache)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from memory_app.mcp import prompts
from memory_app.mcp.manager import SERVICE_SCOPE, agent_scope, mcp_manager
from memory_app.mcp.names import mcp_tool_name
from memory_app.mcp.results import call_result_content
from memory_app.mcp.schemas import checked_schema
from memory_app.mcp.server import ListedTool, McpCallFailed, McpCallRefused, McpServer
from sessions_app.agent_mcp_rules import McpServerConfig, mcp_servers_parse
from sessions_app.agent_mcp_selectors import agent_mcp_configs
from sessions_app.common.caches import LRUCache
from sessions_app.engine.contract import Handler, SessionSnapshot, ToolContext, ToolError, ToolSpec

# Each server's specs, made once per listing: the same `ToolSpec` objects keep their encoded
# definitions (`ToolSpec.definition_texts`) from one request to the next.
_specs: weakref.WeakKeyDictionary[McpServer, tuple[tuple[ListedTool, ...], list[ToolSpec]]] = (
    weakref.WeakKeyDictionary()
)
_service: tuple[Any, tuple[McpServerConfig, ...]] = ({}, ())


def service_configs() -> tuple[McpServerConfig, ...]:
    """The service's servers: the setting as checked when the settings loaded, parsed once per
    value (a test may replace it)."""
    global _service
    raw = settings.PALIMPSEST_MCP_SERVERS
    if _service[0] is not raw:
        _service = (raw, mcp_servers_parse(raw) if isinstance(raw, Mapping) and raw else ())
    return _service[1]


def _handler(server: McpServer, tool: str) -> Handler:
    async def handler(ctx: ToolContext, tool_input: dict) -> Any:
        manager = mcp_manager()
        assert manager is not None
        try:
            result = await manager.call(server, tool, tool_input)
        except McpCallFailed as exc:
            raise ToolError(str(exc)) from None
        except McpCallRefused as exc:
            raise ToolError(prompts.SERVER_REFUSED.format(server=server.config.name, message=exc)) from None
        try:
            content = call_result_content(result)
        except ToolError as exc:
            raise ToolError(server.secrets_masked(str(exc))) from None
        if isinstance(content, str):
            return server.secrets_masked(content)
        return [
            {**block, "text": server.secrets_masked(block["text"])} if block["type"] == "text" else block
            for block in content
        ]

    return handler


def server_specs(server: McpServer) -> list[ToolSpec]:
    """The server's tools as `ToolSpec`s, as it last listed them."""
    tools = server.status.tools
    cached = _specs.get(server)
    if cached is not None and cached[0] is tools:
        return cached[1]
    name = server.config.name
    specs = [
        ToolSpec(
            name=mcp_tool_name(name, tool.name),
            description=tool.description or prompts.NO_DESCRIPTION.format(tool=tool.name, server=name),
            input_schema=tool.input_schema,
            handler=_handler(server, tool.name),
            checked_schema=checked_schema(tool.input_schema),
        )
        for tool in tools
    ]
    _specs[server] = (tools, specs)
    return specs


def session_servers(session: SessionSnapshot) -> list[McpServer]:
    """The servers of the session (the service's, then its agent's), started if they were not."""
    service = service_configs()
    agent = agent_mcp_configs(agent_id=session.agent_id) if session.agent_id is not None else ()
    manager = mcp_manager(create=bool(service or agent))
    if manager is None:
        return []
    servers = manager.servers_sync(SERVICE_SCOPE, service)
    if session.agent_id is not None:
        servers += manager.servers_sync(agent_scope(session.agent_id), agent)
    return servers


# The servers still starting when a session's request was built, by session (`mcp_ready` waits
# for them). Bounded: a request built outside a turn (no `mcp_ready` follows) leaves its entry
# until it is pushed out.
STARTING_SESSIONS = 1024
_starting: LRUCache[uuid.UUID, tuple[McpServer, ...]] = LRUCache(STARTING_SESSIONS)
_starting_lock = threading.Lock()


def mcp_tools(session: SessionSnapshot) -> list[ToolSpec]:
    """The session's MCP tools, in server order (runs in a database thread; waits for nothing:
    a server still starting offers the tools of its last listing, none before its first)."""
    servers = session_servers(session)
    starting = tuple(server for server in servers if not server.first_start_done.is_set())
    if starting:
        with _starting_lock:
            _starting.set(session.id, starting)
    return [spec for server in servers for spec in server_specs(server)]


def _first_starts_wait(servers: tuple[McpServer, ...]) -> None:
    deadline = time.monotonic() + settings.PALIMPSEST_MCP_START_TIMEOUT_SECONDS + 1
    for server in servers:
        server.first_start_done.wait(max(0.0, deadline - time.monotonic()))


async def mcp_ready(session: SessionSnapshot) -> bool:
    """Wait for the first start and listing of the session's servers that were still starting
    when its request was built (in a thread of the event loop's own, not a database thread);
    True when there were any (the request is built again)."""
    with _starting_lock:
        starting = _starting.pop(session.id)
    if not starting:
        return False
    await asyncio.to_thread(_first_starts_wait, starting)
    return True
