"""The server's end of the notepad bridge: requests from the jailed code, applied to the notepad.

Protocol (bootstrap.py has the client): one JSON object per line, UTF-8, on two pipes the jail inherits.
    request  {"id": <int>, "op": "read" | "write" | "append",
              "content": <str> (write only), "text": <str> (append only)}
    reply    {"id": <same>, "ok": true[, "content": <str> (read only)]}
             | {"id": <same, or null if unreadable>, "ok": false, "error": <str>}

Rules:
- Every request line gets exactly one reply, in order, except when the bridge closes.
- A request is applied by awaiting the given notepad object (in production the notepad's own service,
  in a burst: each edit is stored at once as the agent's, and the run's edits share one revision
  and one `notepad.updated` event, sent when the run ends; `run_sandbox_code` makes the burst). Its
  refusal (`ToolError`, `TypeError`, `ValueError`) becomes an error reply with its message; any other
  failure is logged and answered with a generic error. Nothing a request does can crash the server.
- Malformed requests (not JSON, not an object, bad id, unknown op, missing or non-string field) get
  an error reply and the bridge stays open. With no notepad every request gets an error reply.
- A line over BRIDGE_MAX_LINE_BYTES, or more than BRIDGE_MAX_REQUESTS lines in one run, closes the
  bridge (after one error reply): the server holds at most about two lines of a run in memory, and
  writes wait for the code to read its replies (pipe back-pressure), so nothing grows without bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol

from sessions_app.engine.contract import ToolError

# The notepad holds at most 100,000 characters (memory_app's NOTEPAD_MAX_CHARS), at most 6 bytes each
# once JSON-escaped: a line that could carry a whole notepad, plus slack. The notepad refuses more anyway.
BRIDGE_NOTEPAD_MAX_CHARS = 100_000
BRIDGE_MAX_LINE_BYTES = 256 * 1024 + 6 * BRIDGE_NOTEPAD_MAX_CHARS
# Requests of one run: enough for a progress note per step of a long loop, not for a flood of revisions.
BRIDGE_MAX_REQUESTS = 1000
BRIDGE_OPS = {"read": None, "write": "content", "append": "text"}
BRIDGE_MAX_ID = 2**53
NOTEPAD_OFF_ERROR = "the session notepad is switched off for this session"

logger = logging.getLogger("palimpsest")


class SandboxNotepad(Protocol):
    """What the bridge needs of a notepad: memory_app.notepad.SessionNotepad has this shape."""

    async def read(self) -> str: ...

    async def write(self, content: str) -> None: ...

    async def append(self, text: str) -> None: ...


class BridgeRefused(Exception):
    """A request the bridge answers with an error (the message goes to the code as NotepadError)."""

    def __init__(self, message: str, *, request_id: int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


@dataclass
class BridgePipes:
    """The server's ends of the two pipes, as asyncio streams."""

    reader: asyncio.StreamReader
    read_transport: asyncio.ReadTransport
    writer: asyncio.StreamWriter

    def close(self) -> None:
        """Close both ends: the code's further requests fail at once (EPIPE) instead of blocking."""
        self.read_transport.close()
        self.writer.close()


async def bridge_open(*, request_fd: int, reply_fd: int) -> BridgePipes:
    """Wrap the server's ends of the two pipes; the returned object owns the fds from now on."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=BRIDGE_MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(request_fd, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(reply_fd, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return BridgePipes(reader=reader, read_transport=read_transport, writer=writer)


async def bridge_serve(*, notepad: SandboxNotepad | None, pipes: BridgePipes) -> int:
    """Answer requests until the code closes its end, the bridge is closed, or the task is cancelled.

    Returns the number of request lines read. Always closes both pipes.
    """
    count = 0
    reader, writer = pipes.reader, pipes.writer
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return count
            except asyncio.LimitOverrunError:
                await _reply(
                    writer, _error(None, f"request over {BRIDGE_MAX_LINE_BYTES} bytes: bridge closed")
                )
                return count + 1
            count += 1
            if count > BRIDGE_MAX_REQUESTS:
                too_many = f"more than {BRIDGE_MAX_REQUESTS} requests: bridge closed"
                await _reply(writer, _error(_id_of(line), too_many))
                return count
            await _reply(writer, await _answer(notepad, line))
    except (ConnectionError, BrokenPipeError):
        return count  # the code is gone
    finally:
        pipes.close()


def _error(request_id: int | None, message: str) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": message}


async def _reply(writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
    writer.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
    await writer.drain()


async def _answer(notepad: SandboxNotepad | None, line: bytes) -> dict[str, Any]:
    request_id: int | None = None
    try:
        request = _parse(line)
        request_id = request["id"]
        if notepad is None:
            raise BridgeRefused(NOTEPAD_OFF_ERROR)
        op = request["op"]
        if op == "read":
            return {"id": request_id, "ok": True, "content": await notepad.read()}
        if op == "write":
            await notepad.write(request["content"])
        else:
            await notepad.append(request["text"])
        return {"id": request_id, "ok": True}
    except BridgeRefused as exc:
        return _error(request_id if exc.request_id is None else exc.request_id, str(exc))
    except (ToolError, TypeError, ValueError) as exc:
        return _error(request_id, str(exc) or type(exc).__name__)
    except Exception:
        logger.exception("sandbox notepad bridge: request failed")
        return _error(request_id, "the notepad call failed (server error)")


def _id_of(line: bytes) -> int | None:
    try:
        return _parse(line)["id"]  # type: ignore[no-any-return]
    except BridgeRefused as exc:
        return exc.request_id


def _parse(line: bytes) -> dict[str, Any]:
    """The request as a dict with a valid id, op and field, or BridgeRefused saying what is wrong."""
    try:
        request = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BridgeRefused("malformed request: not a JSON line") from None
    if not isinstance(request, dict):
        raise BridgeRefused("malformed request: not a JSON object")
    request_id = request.get("id")
    if type(request_id) is not int or not -BRIDGE_MAX_ID <= request_id <= BRIDGE_MAX_ID:
        raise BridgeRefused("malformed request: id must be an integer")
    op = request.get("op")
    if op not in BRIDGE_OPS:
        raise BridgeRefused(f"unknown op {str(op)[:40]!r}: read, write or append", request_id=request_id)
    field = BRIDGE_OPS[op]
    if field is not None and not isinstance(request.get(field), str):
        raise BridgeRefused(f"{op} needs {field!r} as a string", request_id=request_id)
    return request
