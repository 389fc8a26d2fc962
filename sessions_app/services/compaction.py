"""Compaction's storage: the warning step's notice, and the switch to a new epoch (one
transaction: either the old epoch is intact or the new one is complete)."""

from __future__ import annotations

import uuid

from django.db import transaction

from sessions_app.engine.prompts import COMPACTION_SUMMARY_MESSAGE, PRE_COMPACTION_WARNING
from sessions_app.models import (
    AgentSession,
    Archive,
    Message,
    MessageRole,
    SessionStatus,
)
from sessions_app.services.events import event_emit
from sessions_app.services.messages import message_write
from sessions_app.services.turns import TurnLeaseLost, turn_lock


class CompactionConflict(Exception):
    """The session moved to another epoch meanwhile: nothing was written."""


def compaction_warning_store(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, epoch: int, estimated_tokens: int, threshold_tokens: int
) -> Message:
    """Store seed 000's pre-compaction warning as a user-role notice and announce it."""
    with transaction.atomic():
        turn_lock(session_id, turn_id)
        message = message_write(
            session_id=session_id,
            epoch=epoch,
            role=MessageRole.USER,
            content=[{"type": "text", "text": PRE_COMPACTION_WARNING}],
            turn_id=turn_id,
            metadata={"type": "compaction_warning"},
        )
        event_emit(
            session_id=session_id,
            type="compaction.warning",
            payload={"estimated_tokens": estimated_tokens, "threshold_tokens": threshold_tokens},
        )
    return message


def compaction_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID | None,
    epoch: int,
    summary: str,
    tokens_before: int,
    tokens_after: int,
) -> tuple[Archive, Message]:
    """Close `epoch` into an archive and start the next epoch with the summary, in one transaction.

    The archived messages are left in place. The new epoch's first message carries the seed's
    metadata (`type: compact`, `previous_archive`). Raises `CompactionConflict` (writing nothing)
    if the session is no longer at `epoch`.
    """
    if not summary.strip():
        raise ValueError("a compaction needs a summary")
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if turn_id is not None and session.current_turn_id != turn_id:
            raise TurnLeaseLost
        if session.epoch != epoch:
            raise CompactionConflict
        previous = Archive.objects.filter(session_id=session_id).order_by("-epoch").first()
        archive = Archive.objects.create(
            session_id=session_id,
            epoch=epoch,
            summary=summary,
            message_count=Message.objects.filter(session_id=session_id, epoch=epoch).count(),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            previous=previous,
        )
        AgentSession.objects.filter(pk=session_id).update(
            epoch=epoch + 1,
            last_prompt_tokens=None,
            last_estimated_tokens=None,
            status=SessionStatus.RUNNING if session.current_turn_id else SessionStatus.IDLE,
        )
        message = message_write(
            session_id=session_id,
            epoch=epoch + 1,
            role=MessageRole.USER,
            content=[{"type": "text", "text": COMPACTION_SUMMARY_MESSAGE.format(summary=summary)}],
            turn_id=turn_id,
            metadata={"type": "compact", "previous_archive": str(archive.id)},
        )
        event_emit(
            session_id=session_id,
            type="compaction.completed",
            payload={
                "archive_id": str(archive.id),
                "epoch": epoch + 1,
                "summary": summary,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
            },
        )
    return archive, message
