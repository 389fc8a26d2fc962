"""Answering a tool call that waits for an approval (DESIGN.md, "Operating Palimpsest"), the one
path the websocket frames (`tool.approve` / `tool.deny`), the HTTP API and the dashboard share."""

from __future__ import annotations

import uuid

from sessions_app import services
from sessions_app.common.db import db
from sessions_app.engine.runner import turn_notify, turn_repair_if_dead
from sessions_app.models import ToolCall


async def tool_call_answer(
    *,
    session_id: uuid.UUID,
    tool_use_id: str,
    approved: bool,
    author: str,
    reason: str = "",
    expected_sha256: str | None = None,
) -> ToolCall:
    """Approve or deny the session's call `tool_use_id` (`services.tool_call_approval_answer`,
    whose errors it raises, nothing changed) and wake the turn waiting for it. A turn whose process
    died is taken over here first, so that it runs the call once answered; in another live process
    the turn reads the answer at its next poll."""
    await turn_repair_if_dead(session_id=session_id)
    call = await db(services.tool_call_approval_answer)(
        session_id=session_id,
        tool_use_id=tool_use_id,
        approved=approved,
        author=author,
        reason=reason,
        expected_sha256=expected_sha256,
    )
    turn_notify(session_id)
    return call
