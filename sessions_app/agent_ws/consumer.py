"""The agent websocket (PROTOCOL.md): a thin adapter from frames to services and the engine."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from sessions_app import selectors, services
from sessions_app.agent_ws import connections, quotas
from sessions_app.agent_ws.agents import AgentFrames
from sessions_app.agent_ws.event_stream import SessionEventStream
from sessions_app.agent_ws.frames import (
    MAX_FRAME_INT,
    FrameError,
    descendants_limit_parse,
    frame_parse,
    frame_request_id,
    session_ids_parse,
    since_seqs_parse,
    tool_result_content_check,
)
from sessions_app.agent_ws.intake import FrameIntake
from sessions_app.authors import client_author
from sessions_app.engine import approvals as engine_approvals
from sessions_app.engine import repair, runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.compaction.budget import ContextWindowTooSmall
from sessions_app.engine.features import features
from sessions_app.fastpath.compat import LoopDispatch
from sessions_app.models import AgentSession, AgentToken
from sessions_app.validation import SpecError, session_create_clean

logger = logging.getLogger("palimpsest.ws")
# A frame's text (`json.dumps(frame, ensure_ascii=False)`), by one encoder for every frame.
_frame_json = json.JSONEncoder(ensure_ascii=False).encode
CLOSE_UNAUTHORIZED = 4401
# The answer to a frame about the attached session once an operator deleted it (nothing is
# announced when a session is deleted: `engine.sessions.session_delete`).
SESSION_DELETED = "the attached session no longer exists (it was deleted): create or attach to another"


def _bearer_token(scope: dict) -> str:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return (query.get("token") or [""])[0]


class AgentConsumer(AgentFrames, LoopDispatch, SessionEventStream, AsyncWebsocketConsumer):
    token: AgentToken | None = None
    # When the token was last confirmed active (monotonic seconds; `connections.py`).
    token_verified_at: float = 0.0
    registered: bool = False
    closing: bool = False
    # A client sees the events of the attached session's sub-sessions too (PROTOCOL.md v1.1).
    follow_children = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Refused frames a connection may have in a burst before it is closed (refilling over
        # REFUSALS_PERIOD_SECONDS): a client that keeps sending over its limits is closed.
        self._refusals = quotas.RateLimiter(period_seconds=quotas.REFUSALS_PERIOD_SECONDS, maxsize=1)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        # Every frame is judged as it arrives (`intake`), not when its turn to be handled comes.
        self.intake = FrameIntake(receive, judge=self._frame_judge, refuse=self._frame_refuse)
        try:
            await super().__call__(scope, self.intake.receive, send)
        finally:
            await self.intake.stop()

    async def connect(self) -> None:
        self.session_id = None
        self.last_sent_seq = 0
        self.token = await database_sync_to_async(services.agent_token_authenticate)(
            raw=_bearer_token(self.scope)
        )
        await self.accept()
        if self.token is None:
            # Closing after accept is the only way to hand the client a close code (4401).
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        held = connections.connection_add(self, token_id=self.token.pk)
        self.registered = True
        repair.sweeper_ensure()
        if not quotas.connection_allowed(open_connections=held):
            connections.connection_remove(self, token_id=self.token.pk)
            self.registered = False
            self.closing = True
            await self.close(code=quotas.CLOSE_TOO_MANY_CONNECTIONS)

    async def disconnect(self, code: int) -> None:
        if self.registered and self.token is not None:
            connections.connection_remove(self, token_id=self.token.pk)
            self.registered = False
        # The turn goes on without us; a client re-attaches with since_seq.
        await self.stream_leave()

    async def token_revoked(self) -> None:
        """The token was revoked (or deleted) since this connection opened: close with 4401.

        Called by the process's token re-check or before a frame; nothing more is handled.
        """
        if self.closing:
            return
        self.closing = True
        await self.close(code=CLOSE_UNAUTHORIZED)

    # -- frames as they arrive (`intake`: before any queued work) ---------------------------
    def _frame_judge(self, message: dict) -> str | None:
        """None to let a frame in; else why it is refused. Every frame counts against the quota
        (bad ones too), when it arrives."""
        if self.closing or self.flow_closed:
            return quotas.REFUSED_CLOSING
        if self.token is not None and not quotas.frame_allowed(token_id=self.token.pk):
            return quotas.REFUSED_RATE
        if not self.intake.room_for(message):
            return quotas.REFUSED_BACKLOG
        return None

    async def _frame_refuse(self, message: dict, reason: str) -> None:
        """Answer a refused frame at once with `rate_limited`; a connection that has had more
        than PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE refusals in a burst is closed (4429)."""
        if reason == quotas.REFUSED_CLOSING or self.token is None:
            return
        if not self._refusals.allow(0, limit=settings.PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE):
            logger.warning("closing a websocket that kept sending over its limits (token %s)", self.token.pk)
            self.closing = True
            await self.close(code=quotas.CLOSE_TOO_MANY_CONNECTIONS)
            return
        await self._send_error(
            "rate_limited", quotas.frame_refusal_message(reason), frame_request_id(message.get("text"))
        )

    # -- frames ------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.token is None or self.flow_closed or self.closing:
            return
        if not await connections.token_still_active(self, token_id=self.token.pk):
            return
        request_id = None
        try:
            if text_data is None:
                raise FrameError("invalid_frame", "frames must be JSON text, not binary")
            frame = frame_parse(text_data, max_bytes=settings.PALIMPSEST_MAX_FRAME_BYTES)
            request_id = frame.get("request_id")
            handler = getattr(self, "on_" + frame["type"].replace(".", "_"))
            await handler(frame, request_id)
        except FrameError as exc:
            await self._send_error(
                exc.code, exc.message, exc.request_id if exc.request_id is not None else request_id
            )
        except SpecError as exc:
            await self._send_error(exc.code, exc.message, request_id)
        except (AgentSession.DoesNotExist, selectors.SessionNotFound):
            if self.session_id is None or await self._session_exists(self.session_id):
                logger.exception("frame handling failed")
                await self._send_error("internal_error", "the server could not handle this frame", request_id)
            else:
                await self._send_error("session_not_found", SESSION_DELETED, request_id)
        except Exception:
            # Whatever went wrong, the client gets an answer and keeps its connection; the
            # handlers write inside transactions, so nothing half-done is stored.
            logger.exception("frame handling failed")
            await self._send_error("internal_error", "the server could not handle this frame", request_id)

    async def on_session_create(self, frame: dict, request_id: Any) -> None:
        feature_set = features()
        reserved = feature_set.tool_names()
        # Every field is checked before anything is looked up or stored: a rejected frame costs
        # nothing but its parsing (a huge unique `model` used to be looked up and cached first).
        clean = session_create_clean(
            title=frame.get("title"),
            model=frame.get("model"),
            system_prompt=frame.get("system_prompt"),
            context_window=frame.get("context_window"),
            compact_threshold=frame.get("compact_threshold"),
            tools=frame.get("tools"),
            settings=frame.get("settings"),
            settings_schema=feature_set.settings_schema,
            reserved_tool_names=reserved,
        )
        assert self.token is not None
        agent = (
            await self.agent_of_client(frame["agent"], request_id) if frame.get("agent") is not None else None
        )
        context_window = await engine_sessions.session_context_window_resolve(
            model=clean.get("model") or (agent.model if agent is not None else None),
            context_window=clean.get("context_window"),
        )
        try:
            # The sessions-per-minute quota is counted in the database where the session is
            # stored, with the sub-sessions the token's turns spawn (`services.session_quota_check`).
            session = await database_sync_to_async(engine_sessions.session_create)(
                owner=self.token,
                title=clean.get("title"),
                model=clean.get("model"),
                system_prompt=clean.get("system_prompt"),
                context_window=context_window,
                compact_threshold=clean.get("compact_threshold"),
                tools=clean["tools"],
                # The frame's own settings: a session of an agent merges them over the agent's.
                settings=clean["settings"] if agent is None else frame.get("settings"),
                reserved_tool_names=reserved,
                agent=agent,
            )
        except services.SessionQuotaExceeded as exc:
            raise FrameError("rate_limited", str(exc), request_id) from None
        await self.stream_join(session.id, since_seq=0)
        state = await engine_sessions.session_state_when_ready(session)
        await self._send({"type": "session.created", "session": state}, request_id)

    async def on_session_attach(self, frame: dict, request_id: Any) -> None:
        since_seq = frame.get("since_seq") or 0
        if not 0 <= since_seq <= MAX_FRAME_INT:
            raise FrameError(
                "invalid_frame", f"session.attach: since_seq must be from 0 to {MAX_FRAME_INT}", request_id
            )
        since_seqs = since_seqs_parse(frame.get("since_seqs") or {}, request_id)
        limit = descendants_limit_parse(frame.get("descendants_limit"), "descendants_limit", request_id)
        session = await self._session_for_token(frame["session_id"], request_id)
        # A turn whose process died is repaired before the replay, which then tells its end (or,
        # taken over, goes on here: `pending_tool_calls` says what it waits for).
        repaired = await runner.turn_repair_if_dead(session_id=session.id)
        await self.stream_join(session.id, since_seq=since_seq)
        self.stream_hint(since_seqs)
        # Joined first, listed after: a child spawned meanwhile is announced to a group we are in.
        descendants = await database_sync_to_async(selectors.session_descendants)(session=session)
        # A page of the tree, shallowest and oldest first: the others are followed on request
        # (`session.follow`), so re-attaching to a huge tree sends a bounded part of it.
        chosen = descendants[:limit]
        self.stream_hold_back([d.pk for d in descendants[limit:]])
        for descendant in chosen:
            await self.stream_follow(descendant.pk)
        # Events written while we replay are queued behind this handler and delivered in order.
        # The session's own events first, then each descendant's (a child spawned meanwhile is
        # followed and replayed where its `session.spawned` is).
        await self.stream_replay()
        for descendant in chosen:
            await self.stream_replay(descendant.pk)
        waiting = await runner.turn_waiting(session_id=session.id, taken_over=repaired == "resumed")
        await self._send(
            {
                "type": "session.attached",
                "session_id": str(session.id),
                "last_seq": self.last_sent_seq,
                **await self._descendants_state(session),
                **waiting,
            },
            request_id,
        )

    async def on_session_follow(self, frame: dict, request_id: Any) -> None:
        """An addition (docs/clients.md): follow, and replay, more descendants of the attached
        session: those named in `session_ids`, else the next ones not followed yet (shallowest
        and oldest first), at most `limit`; answered with `session.followed`."""
        self.stream_hint(since_seqs_parse(frame.get("since_seqs") or {}, request_id))
        limit = descendants_limit_parse(frame.get("limit"), "limit", request_id)
        named = session_ids_parse(frame.get("session_ids"), request_id)
        assert self.token is not None
        # `SessionNotFound` here means the attached session was deleted (`receive` says so).
        session = await database_sync_to_async(selectors.session_get_for_token)(
            session_id=str(self._attached(request_id)), token=self.token
        )
        descendants = await database_sync_to_async(selectors.session_descendants)(session=session)
        followed = self.followed_seqs
        candidates = [d for d in descendants if d.pk not in followed]
        if named is not None:
            candidates = [d for d in candidates if d.pk in named]
        chosen = candidates[:limit]
        for descendant in chosen:
            await self.stream_follow(descendant.pk)
        for descendant in chosen:
            await self.stream_replay(descendant.pk)
        state = await self._descendants_state(session, only={d.pk for d in chosen})
        await self._send({"type": "session.followed", "session_id": str(session.pk), **state}, request_id)

    async def _descendants_state(
        self, session: AgentSession, *, only: set[uuid.UUID] | None = None
    ) -> dict[str, Any]:
        """`descendants`: the followed descendants (those of `only`, when given), with the last
        seq of each sent here; `descendants_total`: how many the session has;
        `descendants_more`: whether some are not followed (`session.follow` follows them)."""
        descendants = await database_sync_to_async(selectors.session_descendants)(session=session)
        seqs = self.followed_seqs
        listed = [d for d in descendants if d.pk in seqs and (only is None or d.pk in only)]
        return {
            "descendants": [
                {
                    "session_id": str(d.pk),
                    "parent_session_id": str(d.parent_session_id),
                    "depth": d.depth,
                    "title": d.title,
                    "status": d.status,
                    "last_seq": seqs[d.pk],
                }
                for d in listed
            ],
            "descendants_total": len(descendants),
            "descendants_more": any(d.pk not in seqs for d in descendants),
        }

    async def on_user_message(self, frame: dict, request_id: Any) -> None:
        session_id = self._attached(request_id)
        if not frame["content"].strip():
            raise FrameError("invalid_frame", "user.message: content must not be empty", request_id)
        try:
            await runner.turn_start(session_id=session_id, content=frame["content"], request_id=request_id)
        except services.TokenRevoked:
            # Revoked since the connection last confirmed its token: closed as the re-check would.
            await self.token_revoked()
        except services.TurnInProgress:
            await self._send_error(
                "turn_in_progress",
                "a turn is running in this session; wait for turn.completed or send turn.cancel",
                request_id,
            )
        except services.SessionEnded:
            await self._send_error(
                "session_ended", "this session has ended: it takes no more messages", request_id
            )
        except ContextWindowTooSmall as exc:
            await self._send_error(exc.code, str(exc), request_id)

    async def on_tool_result(self, frame: dict, request_id: Any) -> None:
        attached = self._attached(request_id)
        tool_result_content_check(frame["content"])
        # The call may be a sub-session's: its events reach this connection too.
        session_id = await database_sync_to_async(selectors.client_tool_call_session)(
            session_id=attached, tool_use_id=frame["tool_use_id"]
        )
        # If the turn waiting for it lost its process, this process takes it over first, so the
        # result is used (or the turn is ended, and the result refused).
        await runner.turn_repair_if_dead(session_id=session_id)
        try:
            await database_sync_to_async(services.tool_call_submit_result)(
                session_id=session_id,
                tool_use_id=frame["tool_use_id"],
                content=frame["content"],
                is_error=bool(frame.get("is_error", False)),
            )
        except services.UnknownToolUse as exc:
            await self._send_error("unknown_tool_use_id", str(exc), request_id)
            return
        except services.ToolResultAlreadyGiven:
            await self._send_error(
                "tool_result_already_given",
                f"tool call {frame['tool_use_id']!r} has a result already",
                request_id,
            )
            return
        runner.turn_notify(session_id)

    async def on_tool_approve(self, frame: dict, request_id: Any) -> None:
        await self._approval_answer(frame, request_id, approved=True)

    async def on_tool_deny(self, frame: dict, request_id: Any) -> None:
        await self._approval_answer(frame, request_id, approved=False)

    async def _approval_answer(self, frame: dict, request_id: Any, *, approved: bool) -> None:
        """PROTOCOL.md v1.2: answer a call of the attached session (or of one of its
        sub-sessions) that waits for an approval; the turn goes on (`tool.approval_answered`)."""
        attached = self._attached(request_id)
        session_id = await database_sync_to_async(selectors.approval_call_session)(
            session_id=attached, tool_use_id=frame["tool_use_id"]
        )
        try:
            await engine_approvals.tool_call_answer(
                session_id=session_id,
                tool_use_id=frame["tool_use_id"],
                approved=approved,
                author=client_author(self._owner_name()),
                reason=frame.get("reason") or "",
                expected_sha256=frame.get("input_sha256"),
            )
        except services.UnknownToolUse as exc:
            await self._send_error("unknown_tool_use_id", str(exc), request_id)
        except services.ApprovalNotPending as exc:
            await self._send_error("approval_not_pending", str(exc), request_id)
        except services.ApprovalInputMismatch as exc:
            await self._send_error("approval_input_mismatch", str(exc), request_id)
        except services.ApprovalReasonTooLong as exc:
            await self._send_error("invalid_frame", f"{frame['type']}: {exc}", request_id)

    async def on_turn_cancel(self, frame: dict, request_id: Any) -> None:
        session_id = self._attached(request_id)
        # A turn whose process died is ended (then there is nothing to cancel) or taken over.
        await runner.turn_repair_if_dead(session_id=session_id)
        try:
            await database_sync_to_async(services.turn_cancel_request)(session_id=session_id)
        except services.NoTurnInProgress:
            await self._send_error("no_turn_in_progress", "no turn is running in this session", request_id)
            return
        runner.turn_notify(session_id)

    async def on_session_get(self, frame: dict, request_id: Any) -> None:
        assert self.token is not None
        # `SessionNotFound` here means the attached session was deleted (`receive` says so).
        session = await database_sync_to_async(selectors.session_get_for_token)(
            session_id=str(self._attached(request_id)), token=self.token
        )
        await self._send(
            {
                "type": "session.state",
                "session": await engine_sessions.session_state_when_ready(session),
            },
            request_id,
        )

    async def on_session_update(self, frame: dict, request_id: Any) -> None:
        """PROTOCOL.md v1.2: change the session (the attached one unless `session_id` names
        another of this token's) and answer its state; a bad value is an error, nothing changed."""
        assert self.token is not None
        if frame.get("session_id") is not None:
            session = await self._session_for_token(frame["session_id"], request_id)
        else:
            # `SessionNotFound` here means the attached session was deleted (`receive` says so).
            session = await database_sync_to_async(selectors.session_get_for_token)(
                session_id=str(self._attached(request_id)), token=self.token
            )
        updated = await database_sync_to_async(engine_sessions.session_update)(
            session_id=session.pk,
            title=frame.get("title"),
            context_window=frame.get("context_window"),
            compact_threshold=frame.get("compact_threshold"),
            settings=frame.get("settings"),
        )
        await self._send(
            {
                "type": "session.state",
                "session": await database_sync_to_async(engine_sessions.session_state)(updated),
            },
            request_id,
        )

    # -- events ------------------------------------------------------------
    async def deliver_events(self, events: list[dict]) -> None:
        for event in events:
            # Each send waits while the client is not reading (`flow`).
            await self.send(text_data=_frame_json(event))

    # -- helpers -----------------------------------------------------------
    def _attached(self, request_id: Any) -> uuid.UUID:
        if self.session_id is None:
            raise FrameError("not_attached", "send session.create or session.attach first", request_id)
        return self.session_id

    async def _session_exists(self, session_id: uuid.UUID) -> bool:
        return await AgentSession.objects.filter(pk=session_id).aexists()

    async def _session_for_token(self, session_id: str, request_id: Any) -> AgentSession:
        assert self.token is not None
        try:
            return await database_sync_to_async(selectors.session_get_for_token)(
                session_id=session_id, token=self.token
            )
        except selectors.SessionNotFound:
            raise FrameError("session_not_found", "no such session", request_id) from None

    async def _send(self, frame: dict, request_id: Any) -> None:
        if request_id is not None:
            frame["request_id"] = request_id
        await self.send(text_data=_frame_json(frame))

    async def _send_error(self, code: str, message: str, request_id: Any) -> None:
        await self._send({"type": "error", "code": code, "message": message}, request_id)
