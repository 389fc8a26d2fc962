"""What compaction stores: an epoch closed into its archive and the next epoch begun with the
summary (one transaction: either the old epoch is intact or the new one is complete), the warning
step's notice, masked tool results, the failures in a row (the breaker), and the lease of a
compaction an operator asked for."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions_app.common import metrics
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import (
    AgentSession,
    Archive,
    MaskedResult,
    Message,
    MessageRole,
    SessionStatus,
    Turn,
)
from sessions_app.services.events import event_emit
from sessions_app.services.messages import message_write
from sessions_app.services.recall import recall_documents_carry, recall_summary_index
from sessions_app.services.turns import (
    LEASE_RELEASED,
    TurnLeaseLost,
    lease_held,
    lease_lock_free,
    lease_taken,
    lease_until,
    turn_lock,
)


class CompactionConflict(Exception):
    """The session moved to another epoch meanwhile: nothing was written."""


def compaction_warning_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    estimated_tokens: int,
    threshold_tokens: int,
    texts: Sequence[str],
) -> Message:
    """Store seed 000's pre-compaction warning as a user-role notice and announce it: `texts`
    are the warning (the engine's seed text), then the features' notes (e.g. an open task), each
    its own text block."""
    with transaction.atomic():
        turn_lock(session_id, turn_id)
        message = message_write(
            session_id=session_id,
            epoch=epoch,
            role=MessageRole.USER,
            content=[{"type": "text", "text": text} for text in texts],
            turn_id=turn_id,
            metadata={"type": "compaction_warning"},
        )
        event_emit(
            session_id=session_id,
            type="compaction.warning",
            payload={"estimated_tokens": estimated_tokens, "threshold_tokens": threshold_tokens},
        )
    return message


COMPACTION_BREAKER_FAILURES = 3
# What a compaction summarized (`Archive.kind`, and `kind` in `compaction.completed`).
KIND_HISTORY = "history"
KIND_TURN = "turn"


def compaction_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID | None,
    epoch: int,
    summary: str,
    summary_message: str,
    tokens_before: int,
    tokens_after: int,
    carry_positions: Sequence[int] = (),
    trigger: str = "threshold",
    duration_ms: int = 0,
    masked: Sequence[dict] = (),
) -> tuple[Archive, list[Message]]:
    """Close `epoch` into an archive and start the next epoch with the summary, in one transaction.

    The archived messages are left in place. The new epoch's first message (`summary_message`:
    the summary as the engine's seed text shows it) carries the seed's
    metadata (`type: compact`, `previous_archive`); then come copies of the messages at
    `carry_positions` (the running turn's, kept verbatim: `type: carried`, `from_position`), with
    their masks. Returns the archive and the new epoch's messages. Raises `CompactionConflict`
    (writing nothing) if the session is no longer at `epoch`, `TurnLeaseLost` if `turn_id` lost
    the session.
    """
    if not summary.strip():
        raise ValueError("a compaction needs a summary")
    with transaction.atomic():
        archive = _epoch_close(
            session_id=session_id,
            turn_id=turn_id,
            epoch=epoch,
            summary=summary,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            trigger=trigger,
            duration_ms=duration_ms,
            kept_messages=len(carry_positions),
            masked=masked,
            kind=KIND_HISTORY,
        )
        messages = [
            message_write(
                session_id=session_id,
                epoch=epoch + 1,
                role=MessageRole.USER,
                content=[{"type": "text", "text": summary_message}],
                turn_id=turn_id,
                metadata={"type": "compact", "previous_archive": str(archive.id)},
            )
        ]
        messages += _messages_carry(session_id=session_id, epoch=epoch, positions=carry_positions)
        _compaction_announce(session_id, archive, epoch=epoch + 1, kind=KIND_HISTORY)
    return archive, messages


def compaction_turn_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    summary: str,
    note: str,
    tokens_before: int,
    tokens_after: int,
    carry_before: Sequence[int],
    carry_after: Sequence[int],
    trigger: str = "threshold",
    duration_ms: int = 0,
    masked: Sequence[dict] = (),
) -> tuple[Archive, list[Message]]:
    """Close `epoch` into an archive (`kind: turn`) whose summary is of the running turn's older
    steps, and start the next epoch, in one transaction: copies of the messages at
    `carry_before` (what precedes the turn and the turn's user request), then `note` (the
    summary as the engine's text shows it: a user-role message, `type: turn_summary`,
    `previous_archive`), then copies of the messages at `carry_after` (the turn's newest steps).
    Every copy keeps its content, turn and masks; a copy of the epoch's own summary stays
    `type: compact` (naming its archive, plus `from_position`), the others are `type: carried`.
    `carry_after` must begin with an assistant message and hold every tool call's result, so
    that the new epoch's requests stay valid. Returns the archive and the new epoch's messages;
    raises like `compaction_store`."""
    if not summary.strip():
        raise ValueError("a compaction needs a summary")
    with transaction.atomic():
        archive = _epoch_close(
            session_id=session_id,
            turn_id=turn_id,
            epoch=epoch,
            summary=summary,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            trigger=trigger,
            duration_ms=duration_ms,
            kept_messages=len(carry_before) + len(carry_after),
            masked=masked,
            kind=KIND_TURN,
        )
        messages = _messages_carry(session_id=session_id, epoch=epoch, positions=carry_before)
        messages.append(
            message_write(
                session_id=session_id,
                epoch=epoch + 1,
                role=MessageRole.USER,
                content=[{"type": "text", "text": note}],
                turn_id=turn_id,
                metadata={"type": "turn_summary", "previous_archive": str(archive.id)},
            )
        )
        messages += _messages_carry(session_id=session_id, epoch=epoch, positions=carry_after)
        _compaction_announce(session_id, archive, epoch=epoch + 1, kind=KIND_TURN)
    return archive, messages


def _epoch_close(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID | None,
    epoch: int,
    summary: str,
    tokens_before: int,
    tokens_after: int,
    trigger: str,
    duration_ms: int,
    kept_messages: int,
    masked: Sequence[dict],
    kind: str,
) -> Archive:
    """The archive of `epoch` (its summary indexed for `recall`), and the session moved to the
    next epoch (inside the caller's transaction)."""
    session = AgentSession.objects.select_for_update().get(pk=session_id)
    if turn_id is not None and not lease_held(session, turn_id):
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
        trigger=trigger,
        duration_ms=duration_ms,
        kept_messages=kept_messages,
        masked=list(masked),
        kind=kind,
    )
    recall_summary_index(archive=archive)
    AgentSession.objects.filter(pk=session_id).update(
        epoch=epoch + 1,
        last_prompt_tokens=None,
        last_estimated_tokens=None,
        compaction_failures=0,
        status=SessionStatus.RUNNING if session.current_turn_id else SessionStatus.IDLE,
    )
    return archive


def _messages_carry(*, session_id: uuid.UUID, epoch: int, positions: Sequence[int]) -> list[Message]:
    """Copies of `epoch`'s messages at `positions` into the next epoch, in order, with the masks
    of their tool results and their search documents (inside the caller's transaction)."""
    carried = messages_with_content(
        Message.objects.filter(session_id=session_id, epoch=epoch, position__in=list(positions))
    )
    messages: list[Message] = []
    result_ids: list[str] = []
    moves: list[tuple[int, int]] = []
    for original in carried.order_by("position"):
        metadata: dict = {"type": "carried", "from_position": original.position}
        if (original.metadata or {}).get("type") == "compact":
            # The epoch's own summary, kept by a compaction of the turn: still the epoch's summary.
            metadata = {**original.metadata, "from_position": original.position}
        messages.append(
            message_write(
                session_id=session_id,
                epoch=epoch + 1,
                role=original.role,
                content=resolved(original),
                turn_id=original.turn_id,
                metadata=metadata,
                token_estimate=original.token_estimate,
            )
        )
        moves.append((original.pk, messages[-1].pk))
        result_ids += [b.get("tool_use_id", "") for b in resolved(original) if b.get("type") == "tool_result"]
    recall_documents_carry(carried=moves, epoch=epoch + 1)
    MaskedResult.objects.bulk_create(
        MaskedResult(
            session_id=session_id,
            epoch=epoch + 1,
            tool_use_id=m.tool_use_id,
            observation_id=m.observation_id,
            size_chars=m.size_chars,
            placeholder=m.placeholder,
        )
        for m in MaskedResult.objects.filter(session_id=session_id, epoch=epoch, tool_use_id__in=result_ids)
    )
    return messages


def _compaction_announce(session_id: uuid.UUID, archive: Archive, *, epoch: int, kind: str) -> None:
    event_emit(
        session_id=session_id,
        type="compaction.completed",
        payload={
            "archive_id": str(archive.id),
            "epoch": epoch,
            "summary": archive.summary,
            "tokens_before": archive.tokens_before,
            "tokens_after": archive.tokens_after,
            "trigger": archive.trigger,
            "masked": list(archive.masked),
            "duration_ms": archive.duration_ms,
            "kept_messages": archive.kept_messages,
            "kind": kind,
        },
    )
    trigger = archive.trigger
    transaction.on_commit(lambda: metrics.compaction_observed(trigger=trigger, kind=kind, completed=True))


def masked_result_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    tool_use_id: str,
    observation_id: str,
    size_chars: int,
    placeholder: str,
) -> MaskedResult:
    """Record that requests show `placeholder` for a tool result from now on. Raises
    `TurnLeaseLost` (writing nothing) if the turn lost its lease."""
    with transaction.atomic():
        turn_lock(session_id, turn_id)
        return MaskedResult.objects.create(
            session_id=session_id,
            epoch=epoch,
            tool_use_id=tool_use_id,
            observation_id=observation_id,
            size_chars=size_chars,
            placeholder=placeholder,
        )


def masked_results_copy(
    *,
    source_session_id: uuid.UUID,
    source_epoch: int,
    target_session_id: uuid.UUID,
    tool_use_ids: Collection[str],
) -> int:
    """Give a fork the source epoch's masks of the tool results it copied (`tool_use_ids`), as
    the fork's epoch 0: its requests show those results masked, as the source's do. Returns how
    many."""
    copies = [
        MaskedResult(
            session_id=target_session_id,
            epoch=0,
            tool_use_id=mask.tool_use_id,
            observation_id=mask.observation_id,
            size_chars=mask.size_chars,
            placeholder=mask.placeholder,
        )
        for mask in MaskedResult.objects.filter(
            session_id=source_session_id, epoch=source_epoch, tool_use_id__in=list(tool_use_ids)
        )
    ]
    MaskedResult.objects.bulk_create(copies)
    return len(copies)


def compaction_masked_announce(
    *, session_id: uuid.UUID, masked: Sequence[dict], tokens_before: int, tokens_after: int
) -> None:
    """Announce tool results masked without a summary (`compaction.masked`, an addition)."""
    event_emit(
        session_id=session_id,
        type="compaction.masked",
        payload={"masked": list(masked), "tokens_before": tokens_before, "tokens_after": tokens_after},
    )


def compaction_failure_record(
    *, session_id: uuid.UUID, message: str, trigger: str = "", kind: str = ""
) -> int:
    """Count a failed compaction (the breaker trips at COMPACTION_BREAKER_FAILURES in a row) and
    announce it (`compaction.failed`, an addition). `trigger` and `kind` (of the compaction that
    failed) label it in the metrics. Returns the failures in a row."""
    with transaction.atomic():
        transaction.on_commit(
            lambda: metrics.compaction_observed(trigger=trigger, kind=kind, completed=False)
        )
        AgentSession.objects.filter(pk=session_id).update(compaction_failures=F("compaction_failures") + 1)
        failures = (
            AgentSession.objects.filter(pk=session_id).values_list("compaction_failures", flat=True).get()
        )
        event_emit(
            session_id=session_id,
            type="compaction.failed",
            payload={"message": message, "failures_in_a_row": failures},
        )
    return failures


OPERATOR_COMPACTION = "operator_compaction"


def compaction_operator_begin(*, session_id: uuid.UUID, holder: uuid.UUID | None = None) -> Turn:
    """Take the session's lease (for `holder`) for a compaction an operator asked for (no turn may
    start while it runs; `TurnInProgress` if one is running). It resets the breaker."""
    with transaction.atomic():
        session = lease_lock_free(session_id)
        turn = Turn.objects.create(session=session)
        AgentSession.objects.filter(pk=session_id).update(
            current_turn_id=turn.id,
            lease_expires_at=lease_until(),
            **lease_taken(holder),
            cancel_requested=False,
            compaction_failures=0,
        )
    return turn


def compaction_operator_end(*, session_id: uuid.UUID, turn_id: uuid.UUID, error: str = "") -> None:
    """Release the lease of an operator's compaction; an `error` event says why it failed."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if not lease_held(session, turn_id):
            return  # another process found the lease run out and ended the compaction
        Turn.objects.filter(pk=turn_id).update(
            ended_at=timezone.now(), stop_reason=OPERATOR_COMPACTION, error=error
        )
        released = AgentSession.objects.filter(pk=session_id, current_turn_id=turn_id).update(
            **LEASE_RELEASED,
            status=SessionStatus.IDLE,
        )
        if error:
            event_emit(
                session_id=session_id, type="error", payload={"code": "compaction_failed", "message": error}
            )
        if released:
            event_emit(session_id=session_id, type="session.status", payload={"status": SessionStatus.IDLE})
