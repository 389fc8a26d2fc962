"""The process's MCP servers: one manager per server process, with an event loop of its own in a
daemon thread, on which every server's session lives (`server.McpServer`).

Why a loop of its own: the tool source that offers the servers' tools runs in a database thread
and must neither wait for a network call nor know which event loop serves the turns; a turn's
call (on the turn's loop) hands its work to this loop and awaits the answer
(`asyncio.run_coroutine_threadsafe`, cancelled with the turn). The SDK's sessions stay on the
loop that opened them, whatever loop a turn runs on (tests run each in one of its own).

Servers are started lazily, the first time a tool source or the dashboard asks for them
(`servers_sync`), and stopped when their configuration changes or goes away. A server is known by
its scope (`service`, or `agent:<id>`) and name; its configuration's digest tells a change.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from django.conf import settings

from memory_app.mcp.server import McpServer, ServerStatus
from sessions_app.agent_mcp_rules import McpServerConfig

SERVICE_SCOPE = "service"
# How long stopping every server may take when the process exits or a test resets the manager.
SHUTDOWN_SECONDS = 10.0


def agent_scope(agent_id: int) -> str:
    return f"agent:{agent_id}"


class McpManager:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, str], McpServer] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="palimpsest-mcp", daemon=True)
        self._thread.start()
        # Bumped at every change of a server's status: a cheap "did anything change" for tests.
        self.version = 0

    def _changed(self) -> None:
        self.version += 1

    def servers_sync(self, scope: str, configs: Sequence[McpServerConfig]) -> list[McpServer]:
        """The running (or starting) servers of `scope` for `configs`, in their order: each one
        new or changed is started, each of the scope no longer configured is stopped. Returns at
        once (thread-safe; never waits for a server)."""
        wanted = {config.name: config for config in configs}
        started: list[McpServer] = []
        stopped: list[McpServer] = []
        with self._lock:
            for key, server in list(self._servers.items()):
                if key[0] == scope and (key[1] not in wanted or wanted[key[1]].key != server.config.key):
                    stopped.append(self._servers.pop(key))
            for name, config in wanted.items():
                if (scope, name) not in self._servers:
                    server = McpServer(
                        config,
                        scope=scope,
                        call_timeout=settings.PALIMPSEST_MCP_CALL_TIMEOUT_SECONDS,
                        start_timeout=settings.PALIMPSEST_MCP_START_TIMEOUT_SECONDS,
                        on_change=self._changed,
                    )
                    self._servers[(scope, name)] = server
                    started.append(server)
            servers = [self._servers[(scope, name)] for name in wanted]
        for server in stopped:
            asyncio.run_coroutine_threadsafe(server.stop(), self._loop)
        for server in started:
            self._loop.call_soon_threadsafe(server.start)
        return servers

    def server(self, scope: str, name: str) -> McpServer | None:
        with self._lock:
            return self._servers.get((scope, name))

    def status(self, scope: str, name: str) -> ServerStatus | None:
        """The server's status in this process (None: not started here)."""
        server = self.server(scope, name)
        return None if server is None else server.status

    async def call(self, server: McpServer, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """`server.call` on the manager's loop, awaited from any other loop; cancelling the
        awaiting task cancels the call."""
        future = asyncio.run_coroutine_threadsafe(server.call(tool, arguments), self._loop)
        return await asyncio.wrap_future(future)

    def shutdown(self, timeout: float = SHUTDOWN_SECONDS) -> None:
        """Stop every server and wait (at most `timeout`) for their processes to end."""
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        if not servers or not self._loop.is_running():
            return

        async def stop_all() -> None:
            await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)

        future = asyncio.run_coroutine_threadsafe(stop_all(), self._loop)
        try:
            future.result(timeout)
        except Exception:  # noqa: BLE001 (exiting: whatever is left dies with the process)
            future.cancel()


_manager: McpManager | None = None
_manager_lock = threading.Lock()


def mcp_manager(*, create: bool = True) -> McpManager | None:
    """The process's manager, made (its thread started) on first need when `create`."""
    global _manager
    with _manager_lock:
        if _manager is None and create:
            _manager = McpManager()
            # The servers' processes are stopped as this one exits (an MCP stdio server also
            # ends when its stdin closes).
            atexit.register(_manager.shutdown)
        return _manager


def mcp_manager_reset() -> None:
    """Stop every server of the process (tests; a new configuration starts them again)."""
    manager = mcp_manager(create=False)
    if manager is not None:
        manager.shutdown()
