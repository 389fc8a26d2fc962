"""The tool calls that wait for an approval (DESIGN.md, "Operating Palimpsest"): across sessions
for the Approvals page, or one session's for its page. A call waits while it is `pending` in its
session's running turn (not asked to cancel); the list reads the pending-approval index."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import F

from sessions_app.common.approvals import APPROVAL_PENDING, input_sha256
from sessions_app.models import ToolCall, ToolCallStatus

# Approvals the page lists at once (oldest first); the rest after those are answered.
APPROVALS_SHOWN = 100
# An input longer than this (characters of its JSON) is shown cut, with a note of its size.
INPUT_SHOWN_CHARS = 4000


@dataclass(frozen=True)
class PendingApproval:
    session_id: uuid.UUID
    session_title: str
    owner: str
    tool_use_id: str
    name: str
    input_text: str
    input_cut: int  # how many characters of the input are not shown (0: all are)
    input_sha256: str
    created_at: Any


def _shown(tool_input: Any) -> tuple[str, int]:
    text = json.dumps(tool_input, ensure_ascii=False, indent=2, sort_keys=True)
    if len(text) <= INPUT_SHOWN_CHARS:
        return text, 0
    return text[:INPUT_SHOWN_CHARS], len(text) - INPUT_SHOWN_CHARS


def approvals_pending(
    *, session_id: uuid.UUID | None = None, limit: int = APPROVALS_SHOWN
) -> list[PendingApproval]:
    """The calls waiting for an answer, oldest first (one query): every session's, or
    `session_id`'s."""
    calls = ToolCall.objects.filter(
        approval=APPROVAL_PENDING,
        status=ToolCallStatus.PENDING,
        turn_id=F("session__current_turn_id"),
        session__cancel_requested=False,
    )
    if session_id is not None:
        calls = calls.filter(session_id=session_id)
    rows = calls.order_by("created_at", "pk").values_list(
        "session_id", "session__title", "session__owner__name", "tool_use_id", "name", "input", "created_at"
    )[:limit]
    listed = []
    for sid, title, owner, tool_use_id, name, tool_input, created_at in rows:
        text, cut = _shown(tool_input)
        listed.append(
            PendingApproval(
                session_id=sid,
                session_title=title,
                owner=owner or "",
                tool_use_id=tool_use_id,
                name=name,
                input_text=text,
                input_cut=cut,
                input_sha256=input_sha256(tool_input),
                created_at=created_at,
            )
        )
    return listed
