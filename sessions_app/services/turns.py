"""Turns: the lease that lets one turn at a time write a session's history, its start, its end,
cancels, and the lock every turn write takes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from sessions_app.models import (
    AgentSession,
    MessageRole,
    SessionStatus,
    Turn,
)
from sessions_app.services.events import event_emit
from sessions_app.services.messages import dangling_tool_uses, message_write

INTERRUPTED_TOOL_RESULT = "The turn that called this tool was interrupted before the tool answered."


class TurnInProgress(Exception):
    """The session already runs a turn (its lease has not run out)."""


class UnknownToolUse(Exception):
    """No tool call with that id is waiting for a result in this session."""


class ToolResultAlreadyGiven(Exception):
    """The tool call was answered already."""


class NoTurnInProgress(Exception):
    """There is no running turn to act on."""


class TurnLeaseLost(Exception):
    """The turn writing no longer holds its session's lease: nothing was written."""


def turn_lock(session_id: uuid.UUID, turn_id: uuid.UUID) -> AgentSession:
    """Lock the session row for a write of `turn_id`; `TurnLeaseLost` if another turn holds it.

    Every write a turn makes goes through this inside its transaction, so a turn that lost its
    lease (its process stalled past the expiry and another turn began) cannot write into the
    history the new turn now owns. The session row is always the first lock a turn write takes.
    """
    session = AgentSession.objects.select_for_update().get(pk=session_id)
    if session.current_turn_id != turn_id:
        raise TurnLeaseLost
    return session


def lease_until() -> Any:
    return timezone.now() + timedelta(seconds=django_settings.PALIMPSEST_TURN_LEASE_SECONDS)


def lease_lock_free(session_id: uuid.UUID) -> AgentSession:
    """Lock the session row (inside the caller's transaction) for a new holder of its lease:
    `TurnInProgress` while a turn holds an unexpired lease; a turn whose lease ran out (its
    process died) is closed as an error."""
    session = AgentSession.objects.select_for_update().get(pk=session_id)
    now = timezone.now()
    if session.current_turn_id and session.lease_expires_at and session.lease_expires_at > now:
        raise TurnInProgress
    if session.current_turn_id:
        Turn.objects.filter(pk=session.current_turn_id, ended_at__isnull=True).update(
            ended_at=now, stop_reason="error", error="lease expired"
        )
    return session


def turn_begin(
    *, session_id: uuid.UUID, content: str, request_id: Any = None, token_estimate: int | None = None
) -> Turn:
    """Take the session's turn lease, store the user's message and announce the turn.

    `token_estimate` is the message's estimate when the caller counted it already (the engine
    counts off Django's shared database thread, where a huge text would stall every session).

    Raises `TurnInProgress` while another turn holds an unexpired lease. A history left with
    unanswered tool calls by a crashed turn is repaired first (each gets an error result), so
    the next request is valid.
    """
    with transaction.atomic():
        session = lease_lock_free(session_id)
        dangling = dangling_tool_uses(session)
        if dangling:
            message_write(
                session_id=session.id,
                epoch=session.epoch,
                role=MessageRole.USER,
                content=[
                    {
                        "type": "tool_result",
                        "tool_use_id": i,
                        "content": INTERRUPTED_TOOL_RESULT,
                        "is_error": True,
                    }
                    for i in dangling
                ],
                turn_id=session.current_turn_id,
                metadata={"repair": "interrupted_turn"},
            )
        turn = Turn.objects.create(session=session)
        AgentSession.objects.filter(pk=session.id).update(
            current_turn_id=turn.id,
            lease_expires_at=lease_until(),
            cancel_requested=False,
            status=SessionStatus.RUNNING,
            # A new turn resets the compaction breaker (DESIGN.md).
            compaction_failures=0,
        )
        blocks = [{"type": "text", "text": content}]
        message_write(
            session_id=session.id,
            epoch=session.epoch,
            role=MessageRole.USER,
            content=blocks,
            turn_id=turn.id,
            token_estimate=token_estimate,
        )
        event_emit(
            session_id=session.id, type="user.message", payload={"turn_id": str(turn.id), "content": content}
        )
        started: dict[str, Any] = {"turn_id": str(turn.id)}
        if request_id is not None:
            started["request_id"] = request_id
        event_emit(session_id=session.id, type="turn.started", payload=started)
    return turn


def turn_heartbeat(*, session_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Extend the lease; False when this turn no longer holds it."""
    return bool(
        AgentSession.objects.filter(pk=session_id, current_turn_id=turn_id).update(
            lease_expires_at=lease_until()
        )
    )


def turn_finish(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    stop_reason: str,
    steps: int,
    error: str = "",
    extra: dict | None = None,
) -> None:
    """Release the lease and announce `turn.completed`."""
    with transaction.atomic():
        Turn.objects.filter(pk=turn_id).update(
            ended_at=timezone.now(), stop_reason=stop_reason, steps=steps, error=error
        )
        AgentSession.objects.filter(pk=session_id, current_turn_id=turn_id).update(
            current_turn_id=None,
            lease_expires_at=None,
            cancel_requested=False,
            status=SessionStatus.ERROR if stop_reason == "error" else SessionStatus.IDLE,
            last_activity_at=timezone.now(),
        )
        payload: dict[str, Any] = {"turn_id": str(turn_id), "stop_reason": stop_reason}
        payload.update(extra or {})
        event_emit(session_id=session_id, type="turn.completed", payload=payload)


def turn_cancel_request(*, session_id: uuid.UUID) -> uuid.UUID:
    """Ask the running turn to stop; returns its id. Raises `NoTurnInProgress`."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if (
            not session.current_turn_id
            or not session.lease_expires_at
            or session.lease_expires_at <= timezone.now()
        ):
            raise NoTurnInProgress
        AgentSession.objects.filter(pk=session_id).update(cancel_requested=True)
        return session.current_turn_id


def turn_is_cancelled(*, session_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Whether a cancel was asked for this turn. Raises `TurnLeaseLost` if another turn holds the
    session (that is not a cancel: the lost turn must write nothing, not "cancelled" results)."""
    row = AgentSession.objects.filter(pk=session_id).values("current_turn_id", "cancel_requested").get()
    if row["current_turn_id"] != turn_id:
        raise TurnLeaseLost
    return bool(row["cancel_requested"])


def turn_error_emit(*, session_id: uuid.UUID, code: str, message: str) -> None:
    event_emit(session_id=session_id, type="error", payload={"code": code, "message": message})
