"""Every read about sub-sessions: a child's outcome for its parent's call, a session's children
as the dashboard shows them.

Sessions are named by id: callers (the engine for its own session, the dashboard for staff) have
established access already.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sessions_app.budgets import BUDGET_REACHED
from sessions_app.message_content import RESOLVED, messages_with_content
from sessions_app.models import AgentSession, Message, MessageRole, ToolCall, ToolCallStatus, Turn

REPORT_RESULT = "report_result"
SPAWN_SESSION = "spawn_session"
FORK_SESSION = "fork_session"
DELEGATING_TOOLS = (SPAWN_SESSION, FORK_SESSION)

# What the parent's call returns (DESIGN.md): `status` of the child's turn.
STATUS_REPORTED = "reported"
STATUS_NO_REPORT = "no_report"
STATUS_FAILED = "failed"
STATUS_CANCELLED = "cancelled"
STATUS_MAX_STEPS = "max_steps"
# The child's turn stopped before a model call: its budget or an ancestor's is reached (the
# parent's own next call then stops too when it is the same budget).
STATUS_BUDGET_REACHED = BUDGET_REACHED
_STATUS_OF_STOP_REASON = {
    "end_turn": STATUS_NO_REPORT,
    "cancelled": STATUS_CANCELLED,
    "max_steps": STATUS_MAX_STEPS,
    BUDGET_REACHED: STATUS_BUDGET_REACHED,
}
# How far back a child's last words are looked for.
LAST_TEXT_MESSAGES = 20


def _text_of(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "\n\n".join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    ).strip()


# How far back in the turn a call's step message is looked for (the step's own is the newest).
STEP_MESSAGES = 3


def subsession_call_number(*, session_id: uuid.UUID, turn_id: uuid.UUID, tool_use_id: str) -> int:
    """Which of its step's spawn/fork calls `tool_use_id` is, from 1, in the model's order (read
    from the step's stored assistant message; 1 when it is not found, e.g. a handler called
    outside a turn)."""
    contents = (
        messages_with_content(
            Message.objects.filter(session_id=session_id, turn_id=turn_id, role=MessageRole.ASSISTANT)
        )
        .order_by("-position")
        .values_list(RESOLVED, flat=True)[:STEP_MESSAGES]
    )
    for content in contents:
        number = 0
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            if block.get("name") in DELEGATING_TOOLS:
                number += 1
            if block.get("id") == tool_use_id:
                return max(number, 1)
    return 1


def subsession_last_text(*, child_id: uuid.UUID, turn_id: uuid.UUID) -> str:
    """The last assistant text of the child's turn ("" when it wrote none)."""
    contents = (
        messages_with_content(
            Message.objects.filter(session_id=child_id, turn_id=turn_id, role=MessageRole.ASSISTANT)
        )
        .order_by("-position")
        .values_list(RESOLVED, flat=True)[:LAST_TEXT_MESSAGES]
    )
    return next((text for content in contents if (text := _text_of(content))), "")


def subsession_outcome(*, child_id: uuid.UUID, turn_id: uuid.UUID | None) -> dict[str, Any]:
    """What the parent's spawn or fork call returns once the child's turn `turn_id` is over:
    `{"session_id", "status", "result"}`. `reported` with the text of the child's report_result
    (its last successful one); otherwise the status its turn ended with (`no_report` for a plain
    end, `cancelled`, `max_steps`, `budget_reached`, `failed` for an error or a turn that never
    ran or never ended) and its last assistant text. The notepad is never part of it (seed 000)."""
    outcome: dict[str, Any] = {"session_id": str(child_id), "status": STATUS_FAILED, "result": ""}
    if turn_id is None:
        return outcome
    report = (
        ToolCall.objects.filter(
            session_id=child_id,
            turn_id=turn_id,
            name=REPORT_RESULT,
            status=ToolCallStatus.DONE,
            is_error=False,
        )
        .order_by("-pk")
        .first()
    )
    if report is not None:
        return {**outcome, "status": STATUS_REPORTED, "result": str((report.input or {}).get("result", ""))}
    turn = Turn.objects.filter(pk=turn_id).values("stop_reason", "ended_at").first()
    stop_reason = turn["stop_reason"] if turn is not None and turn["ended_at"] is not None else ""
    outcome["status"] = _STATUS_OF_STOP_REASON.get(stop_reason, STATUS_FAILED)
    outcome["result"] = subsession_last_text(child_id=child_id, turn_id=turn_id)
    return outcome


# ---------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ChildRow:
    session: AgentSession
    # The outcome the parent's call returned; empty while the child runs (or never ran).
    outcome_status: str
    result: str


def subsession_children(*, session_id: uuid.UUID) -> list[ChildRow]:
    """The session's children, oldest first, each with what its parent's call returned. Two queries."""
    children = list(AgentSession.objects.filter(parent_session_id=session_id).order_by("created_at", "pk"))
    calls = dict(
        ToolCall.objects.filter(
            session_id=session_id,
            tool_use_id__in=[c.spawned_by_tool_use_id for c in children],
            status=ToolCallStatus.DONE,
        ).values_list("tool_use_id", "result")
    )
    rows = []
    for child in children:
        result = calls.get(child.spawned_by_tool_use_id)
        if isinstance(result, dict) and "status" in result:
            rows.append(ChildRow(child, str(result["status"]), str(result.get("result", ""))))
        elif child.spawned_by_tool_use_id in calls:
            # The call ended without the child's outcome (the parent's turn was cancelled).
            rows.append(ChildRow(child, STATUS_CANCELLED, ""))
        else:
            rows.append(ChildRow(child, "", ""))
    return rows
