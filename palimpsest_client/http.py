"""The HTTP API v1 (PROTOCOL.md, v1.2) for what a program does without holding a websocket:
listing sessions, reading their events, ending, updating and deleting them, exporting and
importing them, answering tool approvals.

    api = HttpApi("http://127.0.0.1:8000/api/v1/", token)
    async for session in api.sessions(status="idle"):
        print(session["id"], session["title"])
    await api.export_session(session_id, "session.json")

It uses the standard library only (`urllib`, each request in a thread), like the rest of the
package needs nothing but `websockets`. An error answer (`{"code", "message"}` with a 4xx) is
raised as the `ProtocolError` subclass of its code, with the HTTP `status` set on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, BinaryIO

from palimpsest_client.errors import PalimpsestError, ProtocolError, protocol_error

# Read and written in pieces of this size: an export of tens of megabytes is never held whole.
COPY_CHUNK_BYTES = 1024 * 1024


class HttpError(PalimpsestError):
    """The server could not be reached, or answered with something that is not the API's."""


def api_url_from_ws(url: str) -> str:
    """The HTTP API's base URL on the server of an agent websocket URL
    (`ws://host:port/ws/agent/` → `http://host:port/api/v1/`)."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urllib.parse.urlunsplit((scheme, parts.netloc, "/api/v1/", "", ""))


def _error(status: int, body: bytes) -> PalimpsestError:
    try:
        data = json.loads(body)
        code, message = data["code"], data["message"]
    except (ValueError, KeyError, TypeError):
        return HttpError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
    error = protocol_error(str(code), str(message))
    error.status = status  # type: ignore[attr-defined]
    return error


class HttpApi:
    """The HTTP API of one server, with one client's token."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._token = token
        self._timeout = timeout

    # -- the requests --------------------------------------------------------------------
    def _open(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: bytes | BinaryIO | None = None,
        length: int | None = None,
    ) -> Any:
        """The response (an open file-like object) to a request; an error answer raised."""
        url = urllib.parse.urljoin(self.base_url, path)
        if query:
            pairs = {k: v for k, v in query.items() if v is not None}
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
            if length is not None:
                headers["Content-Length"] = str(length)
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            return urllib.request.urlopen(request, timeout=self._timeout)  # noqa: S310 (http(s) only)
        except urllib.error.HTTPError as exc:
            with exc:
                raise _error(exc.code, exc.read()) from None
        except urllib.error.URLError as exc:
            raise HttpError(f"cannot reach {url}: {exc.reason}") from exc

    def _json_sync(
        self, method: str, path: str, data: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        body = None if data is None else json.dumps(data).encode()
        with self._open(method, path, query=query, body=body) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    async def _json(
        self, method: str, path: str, data: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        return await asyncio.to_thread(self._json_sync, method, path, data, query)

    @staticmethod
    def _quote(value: str) -> str:
        return urllib.parse.quote(str(value), safe="")

    # -- sessions ------------------------------------------------------------------------
    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of the client's sessions, newest first: `{"items": [...], "next": cursor}`."""
        query = {"agent": agent, "status": status, "q": q, "limit": limit, "cursor": cursor}
        page: dict[str, Any] = await self._json("GET", "sessions", query=query)
        return page

    async def sessions(
        self, *, agent: str | None = None, status: str | None = None, q: str | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Every session of the client that matches, page after page."""
        cursor = None
        while True:
            page = await self.list_sessions(agent=agent, status=status, q=q, limit=100, cursor=cursor)
            for item in page["items"]:
                yield item
            cursor = page.get("next")
            if not cursor:
                return

    async def get_session(self, session_id: str) -> dict[str, Any]:
        state: dict[str, Any] = await self._json("GET", f"sessions/{self._quote(session_id)}")
        return state

    async def update_session(self, session_id: str, **fields: Any) -> dict[str, Any]:
        """As `session.update`: `title`, `context_window`, `compact_threshold`, `settings` (merged);
        all or nothing. Returns the session's state."""
        state: dict[str, Any] = await self._json("PATCH", f"sessions/{self._quote(session_id)}", fields)
        return state

    async def end_session(self, session_id: str) -> dict[str, Any]:
        """As `session.end`. Returns the session's state."""
        state: dict[str, Any] = await self._json("POST", f"sessions/{self._quote(session_id)}/end")
        return state

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and its sub-sessions, with all they hold (`TurnInProgress` while a
        turn runs)."""
        await self._json("DELETE", f"sessions/{self._quote(session_id)}")

    async def events(
        self, session_id: str, *, since_seq: int = 0, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """One page of the session's stored events after `since_seq`, in order."""
        query = {"since_seq": since_seq, "limit": limit, "cursor": cursor}
        page: dict[str, Any] = await self._json(
            "GET", f"sessions/{self._quote(session_id)}/events", query=query
        )
        return page

    # -- export and import ---------------------------------------------------------------
    def _export_sync(self, session_id: str, target: str | os.PathLike[str] | BinaryIO) -> int:
        with self._open("GET", f"sessions/{self._quote(session_id)}/export") as response:
            if isinstance(target, str | os.PathLike):
                path = Path(target)
                partial = path.with_name(path.name + ".part")
                try:
                    with partial.open("wb") as out:
                        shutil.copyfileobj(response, out, COPY_CHUNK_BYTES)
                    partial.replace(path)  # a broken download never leaves a half file as `path`
                finally:
                    partial.unlink(missing_ok=True)
                return path.stat().st_size
            written = 0
            while chunk := response.read(COPY_CHUNK_BYTES):
                target.write(chunk)
                written += len(chunk)
            return written

    async def export_session(self, session_id: str, target: str | os.PathLike[str] | BinaryIO) -> int:
        """Write the session's export document (`palimpsest.session/1`) to `target` (a path or a
        binary file), streamed; the bytes written."""
        return await asyncio.to_thread(self._export_sync, session_id, target)

    def _import_sync(self, source: str | os.PathLike[str] | bytes) -> dict[str, Any]:
        if isinstance(source, bytes):
            with self._open("POST", "sessions/import", body=source, length=len(source)) as response:
                state: dict[str, Any] = json.loads(response.read())
            return state
        path = Path(source)
        with (
            path.open("rb") as document,
            self._open("POST", "sessions/import", body=document, length=path.stat().st_size) as response,
        ):
            state = json.loads(response.read())
        return state

    async def import_session(self, source: str | os.PathLike[str] | bytes) -> dict[str, Any]:
        """Import an export document (a path, streamed, or its bytes) as a new session of this
        client; the new session's state."""
        return await asyncio.to_thread(self._import_sync, source)

    # -- approvals -----------------------------------------------------------------------
    async def approve(self, session_id: str, tool_use_id: str) -> Any:
        """As `tool.approve`: the waiting call runs."""
        path = f"sessions/{self._quote(session_id)}/tool_calls/{self._quote(tool_use_id)}/approve"
        return await self._json("POST", path)

    async def deny(self, session_id: str, tool_use_id: str, reason: str | None = None) -> Any:
        """As `tool.deny`: the model gets a tool error (with `reason`)."""
        path = f"sessions/{self._quote(session_id)}/tool_calls/{self._quote(tool_use_id)}/deny"
        return await self._json("POST", path, {} if reason is None else {"reason": reason})

    # -- agents --------------------------------------------------------------------------
    async def list_agents(self, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        page: dict[str, Any] = await self._json("GET", "agents", query={"limit": limit, "cursor": cursor})
        return page


__all__ = ["HttpApi", "HttpError", "ProtocolError", "api_url_from_ws"]
