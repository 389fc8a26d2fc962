"""`/api/v1/sessions...`: a client's sessions (PROTOCOL.md, "HTTP API v1"): list, get, update
(as `session.update`), delete, end (as `session.end`) and the events after a seq."""

from __future__ import annotations

import datetime
import uuid

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router

from sessions_app import listing_selectors, selectors, services
from sessions_app.api.auth import request_token
from sessions_app.api.errors import conflict, invalid, not_found, spec_error
from sessions_app.api.paging import CURSOR, LIMIT, POSITION_MAX, cursor_decode, cursor_encode
from sessions_app.api.schemas import (
    ApprovalIn,
    DenialIn,
    Error,
    EventPage,
    SessionOut,
    SessionPage,
    SessionPatch,
    ToolCallApprovalOut,
)
from sessions_app.authors import client_author
from sessions_app.common.approvals import input_sha256
from sessions_app.common.db import db
from sessions_app.engine import agents as engine_agents
from sessions_app.engine import approvals as engine_approvals
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, SessionStatus, ToolCall
from sessions_app.validation import SpecError

router = Router(tags=["sessions"])
ERRORS: dict[int, type] = {400: Error, 401: Error, 404: Error}
SESSION_NOT_FOUND = "no such session (a client sees only its own sessions)"
STATUSES = {choice.value for choice in SessionStatus}


async def client_session(request: HttpRequest, session_id: str) -> AgentSession:
    """The client's session `session_id` (another client's is not found either: nothing is
    revealed), as the websocket's `session_get_for_token` finds it."""
    try:
        return await db(selectors.session_get_for_token)(session_id=session_id, token=request_token(request))
    except selectors.SessionNotFound:
        raise not_found("session_not_found", SESSION_NOT_FOUND) from None


def _created_after(cursor: str | None) -> tuple[datetime.datetime, uuid.UUID] | None:
    position = cursor_decode(cursor, list)
    if position is None:
        return None
    try:
        created_at, pk = position
        return datetime.datetime.fromisoformat(created_at), uuid.UUID(pk)
    except (TypeError, ValueError):
        raise invalid("cursor: not a cursor this list gave; start again without one") from None


@router.get("/sessions", response={200: SessionPage, **ERRORS}, summary="The client's sessions, newest first")
async def sessions_list(
    request: HttpRequest,
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
    agent: str | None = Query(None, description="only the sessions of this agent (by name)"),
    status: str | None = Query(None, description="only sessions in this status"),
    q: str | None = Query(None, description="only sessions whose title contains this (any case)"),
) -> dict:
    if status is not None and status not in STATUSES:
        raise invalid(f"status: must be one of {', '.join(sorted(STATUSES))}")
    page = await db(listing_selectors.sessions_of_client)(
        owner_name=request_token(request).name,
        limit=limit,
        after=_created_after(cursor),
        agent=agent,
        status=status,
        title_contains=q,
    )
    items = [await db(engine_sessions.session_state)(session) for session in page.items]
    last = page.items[-1] if page.more else None
    return {
        "items": items,
        "next": cursor_encode([last.created_at.isoformat(), str(last.pk)]) if last else None,
    }


@router.get("/sessions/{session_id}", response={200: SessionOut, **ERRORS}, summary="One session's state")
async def session_get(request: HttpRequest, session_id: str) -> dict:
    session = await client_session(request, session_id)
    return await db(engine_sessions.session_state)(session)


@router.patch(
    "/sessions/{session_id}",
    response={200: SessionOut, **ERRORS},
    summary="Update a session (as session.update: all or nothing)",
)
async def session_patch(request: HttpRequest, session_id: str, body: SessionPatch) -> dict:
    session = await client_session(request, session_id)
    try:
        updated = await db(engine_sessions.session_update)(
            session_id=session.pk,
            title=body.title,
            context_window=body.context_window,
            compact_threshold=body.compact_threshold,
            settings=body.settings,
        )
    except SpecError as exc:
        raise spec_error(exc) from None
    except AgentSession.DoesNotExist:
        raise not_found("session_not_found", SESSION_NOT_FOUND) from None
    return await db(engine_sessions.session_state)(updated)


@router.delete(
    "/sessions/{session_id}",
    response={204: None, **ERRORS, 409: Error},
    summary="Delete a session with its sub-sessions (409 while a turn runs)",
)
async def session_delete(request: HttpRequest, session_id: str) -> HttpResponse:
    session = await client_session(request, session_id)
    try:
        await db(engine_sessions.session_delete)(session_id=session.pk)
    except services.TurnInProgress:
        raise conflict(
            "turn_in_progress",
            "a turn is running in this session or one of its sub-sessions: wait for it to end, or end "
            "the session first (POST .../end)",
        ) from None
    except AgentSession.DoesNotExist:
        raise not_found("session_not_found", SESSION_NOT_FOUND) from None
    return HttpResponse(status=204)


@router.post(
    "/sessions/{session_id}/end",
    response={200: SessionOut, **ERRORS, 409: Error},
    summary="End a session (as session.end): a running turn is cancelled first",
)
async def session_end(request: HttpRequest, session_id: str) -> dict:
    session = await client_session(request, session_id)
    try:
        ended = await engine_agents.session_end(session_id=session.pk, reason="client")
    except AgentSession.DoesNotExist:
        raise not_found("session_not_found", SESSION_NOT_FOUND) from None
    after = await client_session(request, session_id)
    if session.pk not in ended:
        if after.status == SessionStatus.ENDED:
            raise conflict("session_ended", "this session has ended already")
        raise conflict(
            "turn_in_progress",
            "the session's turn did not stop in time: it will take no more messages; end it again",
        )
    return await db(engine_sessions.session_state)(after)


@router.get(
    "/sessions/{session_id}/events",
    response={200: EventPage, **ERRORS},
    summary="The session's stored events after since_seq, in order",
)
async def session_events(
    request: HttpRequest,
    session_id: str,
    since_seq: int = Query(
        0, ge=0, le=POSITION_MAX, description="the last seq already seen (0: from the first)"
    ),
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
) -> dict:
    session = await client_session(request, session_id)
    after = cursor_decode(cursor, int)
    if after is not None and not 0 <= after <= POSITION_MAX:
        raise invalid("cursor: not a cursor this list gave; start again without one")
    after_seq = since_seq if after is None else after
    events = await db(selectors.session_events_after)(
        session_id=session.pk, after_seq=after_seq, limit=limit + 1
    )
    items = events[:limit]
    more = len(events) > limit
    return {"items": items, "next": cursor_encode(items[-1]["seq"]) if more else None}


async def _approval_answer(
    request: HttpRequest,
    session_id: str,
    tool_use_id: str,
    *,
    approved: bool,
    reason: str | None,
    expected_sha256: str | None,
) -> dict:
    session = await client_session(request, session_id)
    try:
        call = await engine_approvals.tool_call_answer(
            session_id=session.pk,
            tool_use_id=tool_use_id,
            approved=approved,
            author=client_author(request_token(request).name),
            reason=reason or "",
            expected_sha256=expected_sha256,
        )
    except services.UnknownToolUse as exc:
        raise not_found("unknown_tool_use_id", str(exc)) from None
    except services.ApprovalNotPending as exc:
        raise conflict("approval_not_pending", str(exc)) from None
    except services.ApprovalInputMismatch as exc:
        raise conflict("approval_input_mismatch", str(exc)) from None
    except services.ApprovalReasonTooLong as exc:
        raise invalid(str(exc)) from None
    return _approval_out(call)


def _approval_out(call: ToolCall) -> dict:
    return {
        "tool_use_id": call.tool_use_id,
        "name": call.name,
        "input": call.input,
        "input_sha256": input_sha256(call.input),
        "approval": call.approval,
        "reason": call.approval_reason,
        "author": call.approval_author,
    }


APPROVAL_ERRORS: dict[int, type] = {**ERRORS, 409: Error}


@router.post(
    "/sessions/{session_id}/tool_calls/{tool_use_id}/approve",
    response={200: ToolCallApprovalOut, **APPROVAL_ERRORS},
    summary="Approve a tool call that waits for an approval (as tool.approve): it runs",
)
async def tool_call_approve(
    request: HttpRequest, session_id: str, tool_use_id: str, body: ApprovalIn | None = None
) -> dict:
    return await _approval_answer(
        request,
        session_id,
        tool_use_id,
        approved=True,
        reason=None,
        expected_sha256=body.input_sha256 if body is not None else None,
    )


@router.post(
    "/sessions/{session_id}/tool_calls/{tool_use_id}/deny",
    response={200: ToolCallApprovalOut, **APPROVAL_ERRORS},
    summary="Deny a tool call that waits for an approval (as tool.deny): the model gets a tool error",
)
async def tool_call_deny(
    request: HttpRequest, session_id: str, tool_use_id: str, body: DenialIn | None = None
) -> dict:
    return await _approval_answer(
        request,
        session_id,
        tool_use_id,
        approved=False,
        reason=body.reason if body is not None else None,
        expected_sha256=body.input_sha256 if body is not None else None,
    )
