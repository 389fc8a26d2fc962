"""Tool approvals (DESIGN.md, "Operating Palimpsest"): the answer to a call that waits for one.

A server call whose policy is `always_ask` is stored `pending` with its step
(`steps._assistant_step_write`, which also writes `tool.approval_requested`). The owning client
(`tool.approve` / `tool.deny`, the HTTP API) or an operator answers it here; the waiting turn reads
the answer from its row (in this process woken at once by the caller's `turn_notify`, in another
through its poll). The stored input is the one that runs: an answer names the call by its id, and
may carry the digest of the input it saw (`input_sha256`), which must match."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from sessions_app.common.approvals import (
    APPROVAL_APPROVED,
    APPROVAL_DENIED,
    APPROVAL_NONE,
    APPROVAL_PENDING,
    MAX_REASON_CHARS,
    input_sha256,
)
from sessions_app.models import AgentSession, ToolCall, ToolCallStatus
from sessions_app.services.events import events_emit
from sessions_app.services.turns import UnknownToolUse, turn_lock


class ApprovalNotPending(Exception):
    """The call exists but waits for no answer (none was asked, it was answered, its turn ended)."""


class ApprovalInputMismatch(Exception):
    """The answer's `input_sha256` is not the digest of the call's stored input."""


class ApprovalReasonTooLong(ValueError):
    pass


def tool_call_approval_answer(
    *,
    session_id: uuid.UUID,
    tool_use_id: str,
    approved: bool,
    author: str,
    reason: str = "",
    expected_sha256: str | None = None,
) -> ToolCall:
    """Approve or deny the session's call `tool_use_id`, which must wait for an approval in the
    session's running turn, and announce it (`tool.approval_answered`). Raises `UnknownToolUse`
    (no such call in this session), `ApprovalNotPending`, `ApprovalInputMismatch` or
    `ApprovalReasonTooLong`; nothing is changed on error. The caller wakes the turn
    (`turn_notify`)."""
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise ApprovalReasonTooLong(f"reason: at most {MAX_REASON_CHARS} characters")
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        call = ToolCall.objects.filter(session_id=session_id, tool_use_id=tool_use_id).first()
        if call is None:
            raise UnknownToolUse(f"no tool call {tool_use_id!r} exists in this session")
        if call.approval == APPROVAL_NONE:
            raise ApprovalNotPending(f"tool call {tool_use_id!r} does not wait for an approval")
        if call.approval != APPROVAL_PENDING:
            raise ApprovalNotPending(f"tool call {tool_use_id!r} was {call.approval} already")
        if (
            call.status != ToolCallStatus.PENDING
            or call.turn_id != session.current_turn_id
            or session.cancel_requested
        ):
            raise ApprovalNotPending(
                f"tool call {tool_use_id!r} no longer waits: the turn that made it has ended "
                "(or is being cancelled)"
            )
        if expected_sha256 is not None and expected_sha256 != input_sha256(call.input):
            raise ApprovalInputMismatch(
                f"input_sha256 is not the digest of tool call {tool_use_id!r}'s input: the answer is "
                "for another input than the one that would run"
            )
        call.approval = APPROVAL_APPROVED if approved else APPROVAL_DENIED
        call.approval_reason = "" if approved else reason
        call.approval_author = author
        call.approval_at = timezone.now()
        call.save(update_fields=["approval", "approval_reason", "approval_author", "approval_at"])
        payload = {
            "tool_use_id": call.tool_use_id,
            "name": call.name,
            "approved": approved,
            "author": author,
        }
        if not approved:
            payload["reason"] = call.approval_reason
        events_emit(session_id=session_id, events=[("tool.approval_answered", payload)])
    return call


def tool_calls_started(*, session_id: uuid.UUID, turn_id: uuid.UUID, tool_use_ids: list[str]) -> None:
    """Mark a step's server calls as begun (`ToolCall.started_at`): once its approvals are answered,
    just before they run. A turn whose process dies after this is not run again elsewhere.
    Raises `TurnLeaseLost` (writing nothing) if the turn lost its lease."""
    with transaction.atomic():
        turn_lock(session_id, turn_id)
        ToolCall.objects.filter(session_id=session_id, turn_id=turn_id, tool_use_id__in=tool_use_ids).update(
            started_at=timezone.now()
        )
