"""The connection to a Palimpsest server and the session it is attached to (PROTOCOL.md).

One `Client` holds one websocket, attached to one session at a time (and, as the protocol has
it, that session's sub-sessions). A background task reads every frame: events are checked
against the last `seq` seen of their session (a duplicate is dropped; a gap makes the client
re-attach, which fills it), client tools are answered, and replies wake the request that
waits for them. When the connection drops, the task reconnects with backoff and re-attaches
with the last seq seen of every session of the tree (`since_seq`, `since_seqs`), so the
caller's iteration goes on with neither a gap nor a duplicate; frames the server may never
have handled are sent again (a message only when the replay shows that its turn did not
start, tool answers only while their call has no result). A close with 4401 (the token is
wrong or revoked) ends the client with `AuthenticationError` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypedDict

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from palimpsest_client.errors import (
    CLOSE_UNAUTHORIZED,
    AuthenticationError,
    ConnectionLost,
    PalimpsestError,
    protocol_error,
)
from palimpsest_client.events import (
    ApprovalAnswered,
    Event,
    NotepadUpdated,
    ScratchpadUpdated,
    ToolCall,
    ToolResult,
    TurnCompleted,
    event_from_frame,
    is_event,
)
from palimpsest_client.http import HttpApi, api_url_from_ws
from palimpsest_client.tools import ClientTool, ToolAnswer, ToolHandler, tool_answer, tools_split

logger = logging.getLogger("palimpsest_client")

DEFAULT_URL = "ws://127.0.0.1:8000/ws/agent/"
# Larger than any frame the server sends: a replayed tool result may be as large as the
# server's own frame limit (16 MiB by default).
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
# Errors answering a tool result that say the call needs nothing more from this client.
_TOOL_RESULT_SETTLED = frozenset({"tool_result_already_given", "unknown_tool_use_id"})


class SessionState(TypedDict, total=False):
    """The session's public state (`session` in `session.created` and `session.state`)."""

    id: str
    title: str
    model: str
    system_prompt: str
    context_window: int
    compact_threshold: int
    tools: list[dict[str, Any]]
    settings: dict[str, Any]
    status: str
    epoch: int
    last_seq: int
    last_prompt_tokens: int
    turn_id: str | None
    created_at: str
    last_activity_at: str
    server_tools: list[str]
    sandbox: bool
    parent_session_id: str | None
    root_session_id: str
    depth: int
    # PROTOCOL.md v1.2: the session's agent (its name, or None) and the provider answering it;
    # `status` may be "ended".
    agent: str | None
    provider: str


@dataclass
class _Request:
    frame: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    replies: frozenset[str]
    # Sent again after a reconnect (when the server may never have handled it).
    resend: bool


@dataclass
class _Memory:
    """What the events said last of one session's notepad and scratchpad."""

    notepad: str | None = None
    notepad_version: int | None = None
    scratchpad: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Attachment:
    """What the client holds of the session it is attached to (and its sub-sessions)."""

    session: Session | None = None
    # Per session of the attached tree: the last seq seen (gapless from 1).
    seqs: dict[str, int] = field(default_factory=dict)
    memory: dict[str, _Memory] = field(default_factory=dict)
    # Client tools: handlers by name, calls waiting for a result, answers computed.
    handlers: dict[str, ToolHandler] = field(default_factory=dict)
    calls: dict[str, ToolCall] = field(default_factory=dict)
    answers: dict[str, ToolAnswer] = field(default_factory=dict)


@dataclass
class _Switch:
    """A `session.create` or `session.attach` sent and not yet answered. The server checks the
    frame before it leaves the session the connection is attached to, so until the answer comes
    the client keeps what it held of that session in `previous`: an error answer (or a lost
    connection) puts it back, and the client stays where it was. Events that arrive meanwhile
    wait in `events`, since only the answer tells whose they are. The answer settles it even
    when its caller gave up waiting, so the client always holds what the server holds."""

    request_id: str
    previous: _Attachment
    events: list[Event] = field(default_factory=list)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    # The frame went out (before that, a caller who gives up takes the switch back at once).
    sent: bool = False
    # The session switched to, once the server said so.
    session: Session | None = None


@dataclass(frozen=True)
class Reconnect:
    """How a dropped connection is restored: attempts `initial_delay` apart at first, the delay
    doubling (with jitter) up to `max_delay`, for at most `timeout` seconds in all (None: for as
    long as it takes). `enabled=False` ends the client with `ConnectionLost` instead."""

    enabled: bool = True
    initial_delay: float = 0.2
    max_delay: float = 5.0
    timeout: float | None = 120.0


class Client:
    """A connection to a Palimpsest server. Open it with `connect(url, token)`."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        reconnect: Reconnect | None = None,
        open_timeout: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        api_url: str | None = None,
    ) -> None:
        self.url = url
        self._token = token
        #: The server's HTTP API with the same token (PROTOCOL.md "HTTP API v1"): listing, export
        #: and import, approvals. Its URL is the websocket's server's `/api/v1/` unless given.
        self.api = HttpApi(api_url or api_url_from_ws(url), token)
        self._reconnect = reconnect or Reconnect()
        self._open_timeout = open_timeout
        self._max_frame_bytes = max_frame_bytes
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()  # connected and (re)attached: frames may be sent
        self._fatal: PalimpsestError | None = None
        self._ended = asyncio.Event()  # set with `_fatal`
        self._closing = False
        self._pending: dict[str, _Request] = {}
        self._subscribers: set[asyncio.Queue[Event | PalimpsestError]] = set()
        self._session: Session | None = None
        # Per session of the attached tree: the last seq seen (gapless from 1).
        self._seqs: dict[str, int] = {}
        self._memory: dict[str, _Memory] = {}
        self._replaying = False
        self._replay_sink: list[Event] | None = None
        self._reattach_id: str | None = None
        self._switch: _Switch | None = None
        # Client tools: handlers by name, calls waiting for a result, answers computed.
        self._handlers: dict[str, ToolHandler] = {}
        self._calls: dict[str, ToolCall] = {}
        self._answers: dict[str, ToolAnswer] = {}
        self._answering: set[str] = set()
        self._tool_frames: dict[str, str] = {}  # request_id of a tool.result frame → tool_use_id
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Times the connection was restored (for logs and tests).
        self.reconnects = 0

    # -- opening and closing -------------------------------------------------------------
    async def _open(self) -> None:
        try:
            self._ws = await self._dial()
        except InvalidHandshake as exc:
            raise ConnectionLost(f"the server refused the websocket at {self.url}: {exc}") from exc
        self._ready.set()
        self._reader = asyncio.create_task(self._read_forever(), name="palimpsest-client-reader")

    async def _dial(self) -> ClientConnection:
        return await ws_connect(
            self.url,
            additional_headers={"Authorization": f"Bearer {self._token}"},
            max_size=self._max_frame_bytes,
            open_timeout=self._open_timeout,
        )

    async def close(self) -> None:
        """Close the connection. A turn running on the server goes on without it."""
        self._closing = True
        self._fail(ConnectionLost("the client was closed"))
        if self._ws is not None:
            await self._ws.close()
        for task in [self._reader, *self._tasks]:
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def session(self) -> Session | None:
        """The session this connection is attached to, if any."""
        return self._session

    @property
    def failure(self) -> PalimpsestError | None:
        """Why the client ended, once it has: `AuthenticationError` (the server closed the
        connection with 4401: the token is wrong, or was revoked while connected),
        `ConnectionLost` (the connection could not be restored, or `close` was called).
        Every later call raises it."""
        return self._fatal

    async def wait_ended(self) -> PalimpsestError:
        """Wait until the client ends; returns why (`failure`). A program that sits idle between
        calls (a chat waiting for its user) learns of a revoked token at once this way, not at
        its next call."""
        await self._ended.wait()
        assert self._fatal is not None
        return self._fatal

    # -- sessions ------------------------------------------------------------------------
    async def create_session(
        self,
        *,
        title: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        context_window: int | None = None,
        compact_threshold: int | None = None,
        settings: Mapping[str, Any] | None = None,
        tools: Iterable[ClientTool] | None = None,
        handlers: Mapping[str, ToolHandler] | None = None,
        agent: str | None = None,
    ) -> Session:
        """Create a session and attach this connection to it. `tools` are declared to the
        server and answered by their handlers; `handlers` answers tools by name too. `agent`:
        a session of this client's agent of that name (its model and settings are the defaults;
        `AgentNotFound` when there is none). When the server refuses (`InvalidRequest`, ...), the
        client stays attached where it was."""
        specs, by_name = tools_split(tools, handlers)
        frame: dict[str, Any] = {"type": "session.create"}
        for key, value in (
            ("title", title),
            ("model", model),
            ("system_prompt", system_prompt),
            ("context_window", context_window),
            ("compact_threshold", compact_threshold),
            ("settings", dict(settings) if settings is not None else None),
            ("agent", agent),
        ):
            if value is not None:
                frame[key] = value
        if specs:
            frame["tools"] = specs
        switch = await self._switch_begin(_Attachment(handlers=by_name))
        with self._switching(switch):
            await self._request(frame, "session.created", resend=False, request_id=switch.request_id)
        assert switch.session is not None  # set when the reply came (`_switch_commit`)
        return switch.session

    # -- agents (PROTOCOL.md v1.2) --------------------------------------------------------
    async def create_agent(
        self,
        name: str,
        *,
        system_prompt: str | None = None,
        model: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create an agent of this client (its token's name owns it); returns its public state.
        `AgentExists` when there is one of that name, `InvalidRequest` for a bad name or value."""
        frame: dict[str, Any] = {"type": "agent.create", "name": name}
        for key, value in (("system_prompt", system_prompt), ("model", model), ("settings", settings)):
            if value is not None:
                frame[key] = dict(value) if isinstance(value, Mapping) else value
        reply = await self._request(frame, "agent.created", resend=False)
        return dict(reply["agent"])

    async def get_agent(self, name: str) -> dict[str, Any]:
        """This client's agent `name` (its public state); `AgentNotFound` when there is none."""
        reply = await self._request({"type": "agent.get", "name": name}, "agent.state", resend=True)
        return dict(reply["agent"])

    # -- over the HTTP API (PROTOCOL.md v1.2; `self.api` has the rest) ----------------------
    async def list_sessions(self, **filters: Any) -> list[dict[str, Any]]:
        """This client's sessions, newest first, every page (`agent=`, `status=`, `q=` filter)."""
        return [session async for session in self.api.sessions(**filters)]

    async def export_session(self, session_id: str, target: Any) -> int:
        """Write the session's export document to `target` (a path or a binary file); its size."""
        return await self.api.export_session(session_id, target)

    async def import_session(self, source: Any) -> dict[str, Any]:
        """Import an export document (a path or bytes) as a new session of this client; its state
        (attach to it to go on)."""
        return await self.api.import_session(source)

    async def end_session(self, session_id: str) -> dict[str, Any]:
        """End a session of this client, attached or not (as `session.end`); its state."""
        return await self.api.end_session(session_id)

    async def update_session(self, session_id: str, **fields: Any) -> dict[str, Any]:
        """Change a session of this client, attached or not (as `session.update`); its state."""
        return await self.api.update_session(session_id, **fields)

    async def approve(self, session_id: str, tool_use_id: str) -> None:
        """Let a call waiting for approval (`tool.approval_requested`) run."""
        await self.api.approve(session_id, tool_use_id)

    async def deny(self, session_id: str, tool_use_id: str, reason: str | None = None) -> None:
        """Refuse a call waiting for approval: the model reads a tool error (with `reason`)."""
        await self.api.deny(session_id, tool_use_id, reason)

    async def attach(
        self,
        session_id: str,
        *,
        since_seq: int = 0,
        handlers: Mapping[str, ToolHandler] | None = None,
    ) -> Session:
        """Attach this connection to an existing session (one of this token's) and its
        sub-sessions. The events after `since_seq` (all of them by default) are replayed into
        `session.replayed`; client tool calls still waiting for an answer are answered by
        `handlers` (or by handlers registered later with `session.tool`).

        When the server refuses (`SessionNotFound`, ...) or the connection drops before it
        answers, the client stays attached to the session it was attached to before."""
        _, by_name = tools_split((), handlers)
        switch = await self._switch_begin(_Attachment(seqs={session_id: since_seq}, handlers=by_name))
        self._replay_sink = []
        self._replaying = True
        with self._switching(switch):
            await self._request(
                {"type": "session.attach", "session_id": session_id, "since_seq": since_seq},
                "session.attached",
                resend=False,
                request_id=switch.request_id,
            )
        session = switch.session
        assert session is not None  # set when the reply came (`_switch_commit`)
        state = await self._request({"type": "session.get"}, "session.state", resend=True)
        session.info = state["session"]
        return session

    # -- switching sessions ------------------------------------------------------------------
    def _attachment_set(self, attachment: _Attachment) -> _Attachment:
        """Hold `attachment`; returns what was held."""
        held = _Attachment(
            self._session, self._seqs, self._memory, self._handlers, self._calls, self._answers
        )
        self._session = attachment.session
        self._seqs = attachment.seqs
        self._memory = attachment.memory
        self._handlers = attachment.handlers
        self._calls = attachment.calls
        self._answers = attachment.answers
        return held

    async def _switch_begin(self, attachment: _Attachment) -> _Switch:
        """Hold `attachment` (a session yet to be created or attached) while the frame that
        asks for it, sent with the switch's request_id, is answered. One switch at a time:
        the server handles them in order, and each must know what the one before left."""
        while self._switch is not None:
            await self._switch.settled.wait()
        if self._fatal is not None:
            raise self._fatal
        switch = self._switch = _Switch(uuid.uuid4().hex, self._attachment_set(attachment))
        return switch

    @contextlib.contextmanager
    def _switching(self, switch: _Switch) -> Iterator[None]:
        """Around the wait for the switch's answer: a caller who gives up before its frame went
        out takes the switch back (after, the answer or the connection's end settles it)."""
        try:
            yield
        finally:
            if self._switch is switch and not switch.sent:
                self._switch_rollback(deliver=True)

    def _switch_commit(self, reply: dict[str, Any]) -> None:
        """The server switched (`session.created` or `session.attached`): the previous session
        is left, and the waiting events that belong to the new tree are taken."""
        switch, self._switch = self._switch, None
        assert switch is not None
        if switch.previous.session is not None:
            switch.previous.session._attached = False
        if reply.get("type") == "session.created":
            state: SessionState = reply["session"]
            tree = {state["id"]}
        else:
            # Its state comes with `session.get`; a reconnect re-attaches to it meanwhile.
            state = SessionState(id=str(reply.get("session_id")))
            tree = {state["id"]} | {str(d.get("session_id")) for d in reply.get("descendants") or []}
        # The others came before the server switched: the previous tree's (a new session has
        # no events yet).
        for event in switch.events:
            if event.session_id in tree:
                self._on_event(event)
        switch.session = self._session = Session(self, state, replayed=self._replay_sink)
        self._replay_sink = None
        switch.settled.set()

    def _switch_rollback(self, *, deliver: bool) -> None:
        """The switch failed: hold the previous session again. `deliver`: the events that
        arrived meanwhile are its own (the server refused the frame, so never switched)."""
        switch, self._switch = self._switch, None
        assert switch is not None
        self._attachment_set(switch.previous)
        self._replay_sink = None
        self._replaying = False
        if deliver:
            for event in switch.events:
                self._on_event(event)
            # A call of the previous session whose handler finished meanwhile was not answered.
            # (Otherwise the connection is down, and re-attaching answers what still waits.)
            self._answer_pending()
        switch.settled.set()

    # -- sending -------------------------------------------------------------------------
    async def _wait_ready(self) -> ClientConnection:
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._ready.is_set() and self._ws is not None:
                return self._ws
            ready = asyncio.ensure_future(self._ready.wait())
            try:
                # Woken by the connection coming back or by `_fail` (which sets it too).
                await ready
            finally:
                ready.cancel()

    async def _send(self, frame: dict[str, Any]) -> None:
        ws = await self._wait_ready()
        # On a closed connection the reader notices too and reconnects; what needs sending
        # again is sent then.
        with contextlib.suppress(ConnectionClosed):
            await ws.send(json.dumps(frame, ensure_ascii=False))

    async def _request(
        self, frame: dict[str, Any], *replies: str, resend: bool, request_id: str | None = None
    ) -> dict[str, Any]:
        """Send `frame` and wait for its reply (a frame of one of `replies` types with its
        request_id); an error frame is raised as a `ProtocolError` with its code."""
        request_id = request_id or uuid.uuid4().hex
        frame = {**frame, "request_id": request_id}
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Request(frame, future, frozenset(replies), resend)
        try:
            await self._send(frame)
            if self._switch is not None and self._switch.request_id == request_id:
                self._switch.sent = True
            return await future
        finally:
            self._pending.pop(request_id, None)
            if future.done() and not future.cancelled():
                # Also when `_send` raised the client's end, which `_fail` gave the future too:
                # unretrieved, asyncio would print it with a traceback.
                future.exception()
            else:
                future.cancel()

    # -- reading -------------------------------------------------------------------------
    async def _read_forever(self) -> None:
        while True:
            ws = self._ws
            assert ws is not None
            try:
                async for raw in ws:
                    self._receive(raw)
            except ConnectionClosed:
                pass
            except Exception:
                logger.exception("palimpsest_client: reading the connection failed")
                await ws.close()
            if self._closing or self._fatal is not None:
                return
            code = ws.close_code
            self._ready.clear()
            if self._switch is not None:
                # Unanswered: the server may or may not have switched. The previous session is
                # held again and re-attached below, which settles it (its events come again).
                self._switch_rollback(deliver=False)
            if code == CLOSE_UNAUTHORIZED:
                self._fail(AuthenticationError("the server refused the token (close code 4401)", code))
                return
            # Whatever was sent but not answered and cannot safely be sent again fails now.
            lost = ConnectionLost(f"the connection closed (code {code}) before the reply came", code)
            for request in list(self._pending.values()):
                if not request.resend and not request.future.done():
                    request.future.set_exception(lost)
            if not self._reconnect.enabled:
                self._fail(ConnectionLost(f"the connection closed (code {code})", code))
                return
            try:
                await self._redial(code)
            except PalimpsestError as exc:
                self._fail(exc)
                return

    async def _redial(self, code: int | None) -> None:
        """Open a new connection (with backoff) and re-attach to the session, from the last
        seq seen of each session of its tree."""
        loop = asyncio.get_running_loop()
        policy = self._reconnect
        deadline = None if policy.timeout is None else loop.time() + policy.timeout
        delay = policy.initial_delay
        while True:
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, policy.max_delay)
            try:
                ws = await self._dial()
                break
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                logger.info("palimpsest_client: reconnecting to %s failed (%s); retrying", self.url, exc)
                if deadline is not None and loop.time() >= deadline:
                    raise ConnectionLost(
                        f"the connection closed (code {code}) and could not be restored "
                        f"within {policy.timeout} s: {exc}",
                        code,
                    ) from exc
        self._ws = ws
        self.reconnects += 1
        if self._session is None:
            self._ready.set()
            self._resend()
            return
        root = self._session.id
        self._reattach_id = uuid.uuid4().hex
        self._replaying = True
        frame = {
            "type": "session.attach",
            "request_id": self._reattach_id,
            "session_id": root,
            "since_seq": self._seqs.get(root, 0),
            "since_seqs": {sid: seq for sid, seq in self._seqs.items() if sid != root},
        }
        # Not through `_send`: the connection is not ready for other frames until re-attached.
        with contextlib.suppress(ConnectionClosed):
            await ws.send(json.dumps(frame))

    def _receive(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            logger.warning("palimpsest_client: a frame that is not JSON was ignored")
            return
        if not isinstance(frame, dict):
            return
        request_id = frame.get("request_id")
        if is_event(frame):
            if self._switch is not None:
                self._switch.events.append(event_from_frame(frame))
            else:
                self._on_event(event_from_frame(frame))
        if self._switch is not None and request_id == self._switch.request_id:
            if frame.get("type") == "error" and not is_event(frame):
                self._switch_rollback(deliver=True)
            elif frame.get("type") in ("session.created", "session.attached"):
                self._switch_commit(frame)
        if request_id is not None and request_id == self._reattach_id and frame.get("type") == "error":
            self._reattach_id = None
            self._on_reattach_refused(str(frame.get("code")), str(frame.get("message")))
            return
        if frame.get("type") in ("session.attached", "session.followed") and frame.get("descendants_more"):
            # The server follows a page of a large tree at a time (docs/clients.md, additions):
            # ask for the next, until every sub-session is followed.
            self._spawn(self._send({"type": "session.follow"}))
        if frame.get("type") == "session.attached" and request_id == self._reattach_id:
            self._reattach_id = None
            self._on_attached()
            self._ready.set()
            self._resend()
            return
        if frame.get("type") == "session.attached":
            self._on_attached()
        if request_id in self._tool_frames:
            self._on_tool_frame_reply(self._tool_frames.pop(request_id), frame)
            return
        request = self._pending.get(request_id) if isinstance(request_id, str) else None
        if request is None or request.future.done():
            if frame.get("type") == "error" and not is_event(frame):
                logger.warning(
                    "palimpsest_client: server error %s: %s", frame.get("code"), frame.get("message")
                )
            return
        if frame.get("type") == "error" and not is_event(frame):
            request.future.set_exception(
                protocol_error(str(frame.get("code")), str(frame.get("message")), request_id)
            )
        elif frame.get("type") in request.replies:
            request.future.set_result(frame)

    def _on_reattach_refused(self, code: str, message: str) -> None:
        """The server refused to re-attach after a reconnect. Over a quota, the client tries
        again (a new connection, after the backoff); otherwise (the session was deleted
        meanwhile, ...) nothing can restore it, and the client ends instead of waiting for ever."""
        if code == "rate_limited":
            self._spawn(self._drop_connection(reason="re-attach rate-limited"))
            return
        session_id = self._session.id if self._session is not None else None
        self._fail(
            ConnectionLost(
                f"the connection was restored, but the server refused to re-attach to session "
                f"{session_id} ({code}: {message})"
            )
        )
        if self._ws is not None:
            self._spawn(self._ws.close())

    def _on_event(self, event: Event) -> None:
        last = self._seqs.get(event.session_id, 0)
        if event.seq <= last:
            return  # seen already (a replay overlapping what was delivered)
        if event.seq != last + 1:
            # The server's stream is gapless; should one show here all the same, re-attaching
            # from the last seq seen fills it.
            logger.warning(
                "palimpsest_client: session %s jumped from seq %s to %s; re-attaching",
                event.session_id,
                last,
                event.seq,
            )
            self._spawn(self._drop_connection())
            return
        self._seqs[event.session_id] = event.seq
        self._track(event)
        if self._replay_sink is not None:
            self._replay_sink.append(event)
        else:
            for queue in self._subscribers:
                queue.put_nowait(event)

    def _track(self, event: Event) -> None:
        if isinstance(event, ToolCall) and event.executor == "client":
            self._calls[event.tool_use_id] = event
            if not self._replaying:
                self._answer(event)
        elif isinstance(event, ToolResult):
            self._calls.pop(event.tool_use_id, None)
            self._answers.pop(event.tool_use_id, None)
            # A tool.result frame that was taken has no reply: forget it once its result is seen.
            for request_id in [r for r, t in self._tool_frames.items() if t == event.tool_use_id]:
                del self._tool_frames[request_id]
        elif isinstance(event, TurnCompleted):
            # An ended turn waits for nothing more (a crashed turn's calls are closed by the server).
            for tool_use_id, call in list(self._calls.items()):
                if call.session_id == event.session_id:
                    del self._calls[tool_use_id]
                    self._answers.pop(tool_use_id, None)
        elif isinstance(event, NotepadUpdated):
            memory = self._memory.setdefault(event.session_id, _Memory())
            memory.notepad, memory.notepad_version = event.content, event.version
        elif isinstance(event, ScratchpadUpdated):
            self._memory.setdefault(event.session_id, _Memory()).scratchpad[event.space] = event.value

    def _on_attached(self) -> None:
        self._replaying = False
        self._answer_pending()

    def _resend(self) -> None:
        """After a reconnect: send again what the server may not have handled."""
        for request in list(self._pending.values()):
            if request.resend and not request.future.done():
                self._spawn(self._send(request.frame))

    async def _drop_connection(self, reason: str = "sequence gap") -> None:
        if self._ws is not None:
            await self._ws.close(code=1011, reason=reason)

    # -- client tools --------------------------------------------------------------------
    def _answer_pending(self) -> None:
        for call in list(self._calls.values()):
            self._answer(call)

    def _answer(self, call: ToolCall) -> None:
        if call.tool_use_id in self._answering:
            return
        answer = self._answers.get(call.tool_use_id)
        if answer is not None:
            self._spawn(self._send_answer(call.tool_use_id, answer))
            return
        handler = self._handlers.get(call.name)
        if handler is None:
            return  # the caller answers it (`Session.respond`), seeing the event
        self._answering.add(call.tool_use_id)
        self._spawn(self._run_tool(call, handler))

    async def _run_tool(self, call: ToolCall, handler: ToolHandler) -> None:
        try:
            answer = await tool_answer(handler, call.input)
        finally:
            self._answering.discard(call.tool_use_id)
        if call.tool_use_id not in self._calls:
            return  # its turn ended meanwhile
        self._answers[call.tool_use_id] = answer
        if self._ready.is_set():
            await self._send_answer(call.tool_use_id, answer)
        # Otherwise the connection is down: it is sent once re-attached (`_answer_pending`).

    async def _send_answer(self, tool_use_id: str, answer: ToolAnswer) -> None:
        request_id = uuid.uuid4().hex
        self._tool_frames[request_id] = tool_use_id
        frame: dict[str, Any] = {
            "type": "tool.result",
            "request_id": request_id,
            "tool_use_id": tool_use_id,
            "content": answer.content,
        }
        if answer.is_error:
            frame["is_error"] = True
        await self._send(frame)

    def _on_tool_frame_reply(self, tool_use_id: str, frame: dict[str, Any]) -> None:
        if frame.get("type") != "error" or frame.get("code") in _TOOL_RESULT_SETTLED:
            return
        # The server refused the answer itself (too large, bad blocks): the model must not wait
        # for ever, so it is told so instead.
        if self._answers.get(tool_use_id, ToolAnswer("")).is_error and tool_use_id not in self._calls:
            return
        refusal = ToolAnswer(
            f"the client's answer was refused by the server ({frame.get('code')}: {frame.get('message')})",
            is_error=True,
        )
        if self._answers.get(tool_use_id) == refusal:
            return
        self._answers[tool_use_id] = refusal
        self._spawn(self._send_answer(tool_use_id, refusal))

    def _handler_set(self, name: str, handler: ToolHandler) -> None:
        self._handlers[name] = handler
        self._answer_pending()

    # -- subscribers and failure ---------------------------------------------------------
    def _subscribe(self) -> asyncio.Queue[Event | PalimpsestError]:
        if self._fatal is not None:
            raise self._fatal
        queue: asyncio.Queue[Event | PalimpsestError] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def _unsubscribe(self, queue: asyncio.Queue[Event | PalimpsestError]) -> None:
        self._subscribers.discard(queue)

    def _fail(self, error: PalimpsestError) -> None:
        """End the client: every waiter gets `error`."""
        if self._fatal is None:
            self._fatal = error
        self._ended.set()
        if self._switch is not None:
            self._switch_rollback(deliver=False)
        for request in self._pending.values():
            if not request.future.done():
                request.future.set_exception(error)
        for queue in self._subscribers:
            queue.put_nowait(error)
        self._ready.set()  # wakes `_wait_ready`, which raises

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._spawned_done)

    def _spawned_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        # Retrieved here, or asyncio prints it with a traceback when the task is collected. The
        # client's end (a tool answer ready after it, say) is told to the caller, not here.
        error = task.exception()
        if error is not None and not isinstance(error, PalimpsestError):
            logger.error("palimpsest_client: a background task failed", exc_info=error)


class Session:
    """A session the client is attached to (`Client.create_session` or `Client.attach`).

    Iterating `send(text)` runs one turn; its own events and its sub-sessions' come typed, each
    naming its `session_id`. Client tools are answered by their handlers without the caller's
    help; a call with no handler is left to the caller (`respond`).
    """

    def __init__(self, client: Client, state: SessionState, *, replayed: list[Event] | None = None) -> None:
        self._client = client
        self.info: SessionState = state
        #: The events replayed when attaching (empty for a created session).
        self.replayed: list[Event] = replayed or []
        self._attached = True

    @property
    def id(self) -> str:
        return self.info["id"]

    def _check(self) -> None:
        if not self._attached or self._client.session is not self:
            raise PalimpsestError(f"session {self.id} is no longer attached to this client")

    async def send(self, content: str) -> AsyncGenerator[Event, None]:
        """Send a user message and yield the turn's events (the session's and its
        sub-sessions') until its `turn.completed`, which is yielded last. Raises
        `TurnInProgress` when a turn is running already, `ConnectionLost` if the connection
        cannot be restored."""
        self._check()
        client = self._client
        queue = client._subscribe()
        try:
            started = await client._request(
                {"type": "user.message", "content": content}, "turn.started", resend=True
            )
            turn_id = started["turn_id"]
            while True:
                item = await queue.get()
                if isinstance(item, PalimpsestError):
                    raise item
                yield item
                if isinstance(item, TurnCompleted) and item.session_id == self.id and item.turn_id == turn_id:
                    return
        finally:
            client._unsubscribe(queue)

    async def events(self) -> AsyncGenerator[Event, None]:
        """Every event from now on (the session's and its sub-sessions'), for as long as the
        caller iterates."""
        self._check()
        queue = self._client._subscribe()
        try:
            while True:
                item = await queue.get()
                if isinstance(item, PalimpsestError):
                    raise item
                yield item
        finally:
            self._client._unsubscribe(queue)

    async def cancel(self) -> TurnCompleted:
        """Cancel the running turn; returns its `turn.completed` (`stop_reason` `cancelled`,
        or how it ended if it ended first). Raises `NoTurnInProgress` when none is running."""
        completed = await self._until(
            {"type": "turn.cancel"},
            resend=True,
            match=lambda item: isinstance(item, TurnCompleted) and item.session_id == self.id,
        )
        assert isinstance(completed, TurnCompleted)
        return completed

    async def end(self) -> None:
        """End the session (`session.end`): a running turn is cancelled first; from then on it
        takes no more messages (`SessionEnded`) but stays readable. Returns once the server
        announced `session.ended` (`SessionEnded` if it had ended already)."""
        await self._until(
            {"type": "session.end", "session_id": self.id},
            resend=False,
            match=lambda item: item.type == "session.ended" and item.session_id == self.id,
        )

    async def approve(self, tool_use_id: str, *, input_sha256: str | None = None) -> ApprovalAnswered:
        """Approve a call that waits for an approval (`ApprovalRequested`): it runs. With
        `input_sha256` (the request's), the answer holds only for that input. Returns the
        `tool.approval_answered` event; a refusal raises `ProtocolError` (`approval_not_pending`,
        `approval_input_mismatch`, `unknown_tool_use_id`)."""
        return await self._approval_answer({"type": "tool.approve"}, tool_use_id, input_sha256)

    async def deny(
        self, tool_use_id: str, reason: str | None = None, *, input_sha256: str | None = None
    ) -> ApprovalAnswered:
        """Deny a call that waits for an approval: the model gets a tool error with `reason`."""
        frame: dict[str, Any] = {"type": "tool.deny"}
        if reason is not None:
            frame["reason"] = reason
        return await self._approval_answer(frame, tool_use_id, input_sha256)

    async def _approval_answer(
        self, frame: dict[str, Any], tool_use_id: str, input_sha256: str | None
    ) -> ApprovalAnswered:
        frame = {**frame, "tool_use_id": tool_use_id}
        if input_sha256 is not None:
            frame["input_sha256"] = input_sha256
        answered = await self._until(
            frame,
            resend=False,
            match=lambda item: isinstance(item, ApprovalAnswered) and item.tool_use_id == tool_use_id,
        )
        assert isinstance(answered, ApprovalAnswered)
        return answered

    async def _until(self, frame: dict[str, Any], *, resend: bool, match: Callable[[Event], bool]) -> Event:
        """Send `frame`, which has no reply frame of its own (an error frame is raised), and
        wait for the first event that `match`es."""
        self._check()
        client = self._client
        queue = client._subscribe()
        request = asyncio.ensure_future(client._request(frame, resend=resend))
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, request}, return_when=asyncio.FIRST_COMPLETED)
                if request in done:
                    getter.cancel()
                    request.result()  # raises the error; a success has no reply frame
                    continue
                item = getter.result()
                if isinstance(item, PalimpsestError):
                    raise item
                if match(item):
                    return item
        finally:
            request.cancel()
            with contextlib.suppress(BaseException):
                await request
            client._unsubscribe(queue)

    async def state(self) -> SessionState:
        """The session's public state now (`session.get`)."""
        self._check()
        reply = await self._client._request({"type": "session.get"}, "session.state", resend=True)
        self.info = reply["session"]
        return self.info

    async def update(
        self,
        *,
        title: str | None = None,
        context_window: int | None = None,
        compact_threshold: float | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> SessionState:
        """Change the session (`session.update`: `settings` merged, all or nothing; a new window or
        threshold applies from the next model call, a raised budget to the next message).
        Returns its state."""
        self._check()
        frame: dict[str, Any] = {"type": "session.update", "session_id": self.id}
        for key, value in (
            ("title", title),
            ("context_window", context_window),
            ("compact_threshold", compact_threshold),
            ("settings", dict(settings) if settings is not None else None),
        ):
            if value is not None:
                frame[key] = value
        reply = await self._client._request(frame, "session.state", resend=False)
        self.info = reply["session"]
        return self.info

    async def respond(
        self, tool_use_id: str, content: str | list[dict[str, Any]], *, is_error: bool = False
    ) -> None:
        """Answer a client tool call by hand (one that no handler answers)."""
        self._check()
        answer = ToolAnswer(content, is_error)
        if tool_use_id in self._client._calls:
            # Kept until its result is seen, to be sent again after a reconnect.
            self._client._answers[tool_use_id] = answer
        await self._client._send_answer(tool_use_id, answer)

    def tool(
        self, name: str, description: str | None = None, input_schema: dict[str, Any] | None = None
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Register the handler of a client tool the session declares:
        `@session.tool("lookup")`, or `@session.tool("lookup", "Look a word up.", schema)` to
        check the declaration as well. The protocol fixes a session's client tools when it is
        created (`session.create`'s `tools`, see `tool(...)` and `ClientTool`), so a name it does
        not declare, or a description or schema other than the declared one, is a `ValueError`.
        Calls waiting for the tool are answered at once."""
        self._check()
        declared = {str(spec.get("name")): spec for spec in self.info.get("tools", [])}
        spec = declared.get(name)
        if spec is None:
            raise ValueError(
                f"session {self.id} declares no client tool {name!r} (it has {sorted(declared)}); "
                "client tools are declared when the session is created"
            )
        if description is not None and description != spec.get("description"):
            raise ValueError(
                f"client tool {name!r} of session {self.id} was declared with the description "
                f"{spec.get('description')!r}, not {description!r}"
            )
        if input_schema is not None and input_schema != spec.get("input_schema"):
            raise ValueError(
                f"client tool {name!r} of session {self.id} was declared with another input_schema: "
                f"{spec.get('input_schema')!r}"
            )

        def register(handler: ToolHandler) -> ToolHandler:
            self._client._handler_set(name, handler)
            return handler

        return register

    # -- what the events said of its memory ----------------------------------------------
    def notepad(self, session_id: str | None = None) -> str | None:
        """The notepad as the last `notepad.updated` seen said (this session's, or a
        sub-session's), or None when no update was seen since the attach point (a session
        attached from seq 0 with no update has an empty notepad)."""
        memory = self._client._memory.get(session_id or self.id)
        return memory.notepad if memory else None

    def scratchpad(self, session_id: str | None = None) -> dict[str, Any]:
        """The scratchpad spaces (`notes`, `plan`, `refs`) as the last `scratchpad.updated`
        of each said (spaces with no update seen are missing)."""
        memory = self._client._memory.get(session_id or self.id)
        return dict(memory.scratchpad) if memory else {}

    def last_seq(self, session_id: str | None = None) -> int:
        """The last seq seen of this session (or of a sub-session)."""
        return self._client._seqs.get(session_id or self.id, 0)


class connect:  # noqa: N801 (used like a function, as `websockets.connect` is)
    """Open a client: `async with connect(url, token) as client:` (or `client = await
    connect(...)`, then `await client.close()`)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str = "",
        *,
        reconnect: Reconnect | None = None,
        open_timeout: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        api_url: str | None = None,
    ) -> None:
        self._client = Client(
            url,
            token,
            reconnect=reconnect,
            open_timeout=open_timeout,
            max_frame_bytes=max_frame_bytes,
            api_url=api_url,
        )

    async def _open(self) -> Client:
        await self._client._open()
        return self._client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._open().__await__()

    async def __aenter__(self) -> Client:
        return await self._open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.close()
