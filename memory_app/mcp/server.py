"""One configured MCP server in this process: started through the `mcp` SDK (stdio: the configured
command, with the configured env and PATH; streamable HTTP: the URL), its session kept open, its
tools listed at start and again when it says they changed (`notifications/tools/list_changed`),
restarted when it fails (a crash, a call that timed out, a broken stream), at once after it had
been running and with a growing delay after a failed start.

Everything here runs on the manager's event loop (`manager.McpManager`), in one task per server
(the SDK's context managers are entered and left in that task). What other threads read is
`status`, an immutable `ServerStatus` replaced whole: the tool source (a database thread) and
the dashboard read it without waiting for anything."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from memory_app.mcp import limits, prompts
from sessions_app.agent_mcp_rules import MASKED, McpServerConfig

logger = logging.getLogger("palimpsest.mcp")

STARTING, RUNNING, FAILED, STOPPED = "starting", "running", "failed", "stopped"
# An env value shorter than this is not looked for in what a server says (it would mask words).
SECRET_MIN_CHARS = 4


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server listed it, kept within the bounds (`limits`)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ServerStatus:
    state: str = STARTING
    tools: tuple[ListedTool, ...] = ()
    # Tools the listing held beyond the bounds (too many, a schema too large or not an object).
    tools_left_out: int = 0
    # The last failure, secrets masked (for the dashboard; the model gets `prompts` texts).
    error: str = ""
    restarts: int = 0
    since: float = field(default_factory=time.time)
    # Set when a call may wait for the server: it runs, or a restart is under way.
    retry_at: float = 0.0


class McpCallFailed(Exception):
    """The call got no answer: the message is for the model (no server text in it)."""


class McpCallRefused(Exception):
    """The server answered the call with a JSON-RPC error; the message is its text, masked."""


def masked(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if len(secret) >= SECRET_MIN_CHARS:
            text = text.replace(secret, MASKED)
    return text


def listed_tools(tools: list[types.Tool]) -> tuple[tuple[ListedTool, ...], int]:
    """The tools kept of a listing, and how many were left out."""
    kept: list[ListedTool] = []
    for tool in tools:
        if len(kept) >= limits.MCP_TOOLS_MAX:
            break
        schema = tool.input_schema
        if not isinstance(schema, dict) or schema.get("type") != "object":
            continue
        if len(json.dumps(schema, ensure_ascii=False).encode()) > limits.MCP_SCHEMA_MAX_BYTES:
            continue
        description = (tool.description or "")[: limits.MCP_DESCRIPTION_MAX_CHARS]
        kept.append(ListedTool(name=tool.name, description=description, input_schema=schema))
    return tuple(kept), len(tools) - len(kept)


class McpServer:
    """One server of one scope (the service's, or an agent's), started by `start` on the
    manager's loop and stopped by `stop`."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        scope: str,
        call_timeout: float,
        start_timeout: float,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.scope = scope
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.status = ServerStatus()
        self._on_change = on_change
        self._secrets = config.secrets()
        # Set once the first start has ended, well or not: the tool source waits for it once.
        self.first_start_done = threading.Event()
        self._session: ClientSession | None = None
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._ready: asyncio.Event | None = None
        self._broken = ""
        self._relist = False
        self._stopping = False

    # -- life --------------------------------------------------------------
    def start(self) -> None:
        """Begin the server's task (on the manager's loop)."""
        self._wake, self._ready = asyncio.Event(), asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.config.name}")

    async def stop(self) -> None:
        """Stop the server and wait until its process is gone (on the manager's loop)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._publish(state=STOPPED, error="", retry_at=0.0)

    def _publish(self, **changes: Any) -> None:
        current = self.status
        values = {name: getattr(current, name) for name in ServerStatus.__dataclass_fields__}
        if changes.get("state", current.state) != current.state:
            values["since"] = time.time()
        values.update(changes)
        self.status = ServerStatus(**values)
        self._on_change()

    async def _run(self) -> None:
        delay = 0.0
        restarts = 0
        while not self._stopping:
            ran = False
            try:
                ran = await self._serve()
                error = self._broken or prompts.REASON_CRASHED
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 (an SDK's group wraps any failure)
                error = _described(exc)
            finally:
                self._session = None
                if self._ready is not None:
                    self._ready.clear()
                self.first_start_done.set()
            if self._stopping:
                return
            error = masked(error, self._secrets)[: limits.MCP_ERROR_MAX_CHARS]
            logger.warning("MCP server %s (%s) failed: %s", self.config.name, self.scope, error)
            delay = (
                0.0
                if ran
                else min(
                    max(delay * 2, limits.MCP_RESTART_FIRST_DELAY_SECONDS),
                    limits.MCP_RESTART_MAX_DELAY_SECONDS,
                )
            )
            restarts += 1
            self._publish(state=FAILED, error=error, restarts=restarts, retry_at=time.time() + delay)
            await asyncio.sleep(delay)
            self._publish(state=STARTING)

    def _transport(self) -> Any:
        if self.config.url:
            return streamable_http_client(self.config.url, max_sse_event_size=limits.MCP_MESSAGE_MAX_BYTES)
        # The configured env and PATH, not this process's environment (its keys, its database);
        # the SDK adds its short list of harmless names (HOME, USER, SHELL, TERM, LOGNAME).
        env = {"PATH": os.environ.get("PATH", os.defpath), **dict(self.config.env)}
        params = StdioServerParameters(command=self.config.command, args=list(self.config.args), env=env)
        # Its stderr is not this process's log: a server may print its environment there.
        return stdio_client(params, errlog=cast(Any, subprocess.DEVNULL))

    async def _serve(self) -> bool:
        """One run of the server: start, list, then answer until it breaks or is stopped.
        Whether it got as far as running."""
        assert self._wake is not None and self._ready is not None
        self._broken, self._relist = "", False
        async with contextlib.AsyncExitStack() as stack:
            # Entering these spawns the process (or opens the HTTP client) without waiting for
            # the server; the bound is on what does (a cancel scope must not span their exits).
            streams = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(
                ClientSession(streams[0], streams[1], message_handler=self._on_message)
            )
            with anyio.fail_after(self.start_timeout):
                await session.initialize()
                await self._list(session)
            self._session = session
            self._publish(state=RUNNING, error="", retry_at=0.0)
            self._ready.set()
            self.first_start_done.set()
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._broken:
                    return True
                if self._relist:
                    self._relist = False
                    try:
                        with anyio.fail_after(self.call_timeout):
                            await self._list(session)
                    except Exception as exc:  # noqa: BLE001
                        self._broken = f"listing its tools again failed: {type(exc).__name__}"
                        return True

    async def _list(self, session: ClientSession) -> None:
        tools: list[types.Tool] = []
        cursor = None
        for _ in range(limits.MCP_LIST_PAGES_MAX):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor or len(tools) >= limits.MCP_TOOLS_MAX:
                break
        kept, left_out = listed_tools(tools)
        self._publish(tools=kept, tools_left_out=left_out)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._wake is not None:
            self._relist = True
            self._wake.set()

    def _break(self, reason: str) -> None:
        """Take the session out of use at once (a call made meanwhile waits for the restart) and
        wake the server's task to restart it."""
        self._session = None
        if self._ready is not None:
            self._ready.clear()
        if self._wake is not None and not self._broken:
            self._broken = reason
            self._wake.set()

    # -- calls -------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call `tool` (on the manager's loop). Raises `McpCallFailed` when the server is not
        running or fails during the call (it is restarted), `McpCallRefused` for its error."""
        name = self.config.name
        if self._session is None:
            status = self.status
            if self._stopping or (status.state == FAILED and status.retry_at > time.time() + 1):
                reason = prompts.REASON_STOPPED if self._stopping else prompts.REASON_START
                raise McpCallFailed(prompts.SERVER_UNAVAILABLE.format(server=name, reason=reason))
            assert self._ready is not None
            try:
                await asyncio.wait_for(self._ready.wait(), self.start_timeout + 1)
            except TimeoutError:
                raise McpCallFailed(
                    prompts.SERVER_UNAVAILABLE.format(server=name, reason=prompts.REASON_START)
                ) from None
        session = self._session
        if session is None:
            raise McpCallFailed(prompts.SERVER_UNAVAILABLE.format(server=name, reason=prompts.REASON_START))
        try:
            with anyio.fail_after(self.call_timeout):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            reason = prompts.REASON_TIMEOUT.format(seconds=self.call_timeout)
            self._break(f"a call of {tool} got {reason}")
            raise McpCallFailed(prompts.SERVER_FAILED.format(server=name, reason=reason)) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise McpCallRefused(masked(exc.message, self._secrets)) from None
            self._break(f"the connection closed during a call of {tool}")
        except Exception as exc:  # noqa: BLE001 (a broken stream, a malformed answer)
            self._break(f"a call of {tool} failed: {type(exc).__name__}")
        raise McpCallFailed(prompts.SERVER_FAILED.format(server=name, reason=prompts.REASON_CRASHED))

    def secrets_masked(self, text: str) -> str:
        return masked(text, self._secrets)


def _described(exc: BaseException) -> str:
    """An exception as one line: the first failure inside the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "it did not start and list its tools in time"
    return f"{type(exc).__name__}: {exc}"
