"""Every state change of sessions, turns, messages, tool calls and events.

Rules that hold for every service here:
- A change and the `SessionEvent`s announcing it are written in one transaction; events reach
  watchers only after commit (`announce_on_commit`).
- `seq` is allocated by incrementing `AgentSession.last_seq` inside that transaction, which takes
  the session's row lock until commit: concurrent writers queue, so `seq` is gapless.
- Message positions are allocated the same way from `AgentSession.next_position`.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions_app.announce import announce_on_commit
from sessions_app.engine.model_table import context_window_for
from sessions_app.engine.prompts import COMPACTION_SUMMARY_MESSAGE, PRE_COMPACTION_WARNING
from sessions_app.engine.tokens import estimate_json_tokens
from sessions_app.engine.types import ModelCallData, PlannedToolCall, ToolOutcome
from sessions_app.models import (
    AgentSession,
    AgentToken,
    Archive,
    Message,
    MessageRole,
    ModelCall,
    SessionEvent,
    SessionStatus,
    ToolCall,
    ToolCallStatus,
    ToolExecutor,
    Turn,
)
from sessions_app.validation import client_tools_clean, session_fields_clean, settings_clean

TOKEN_PREFIX = "pal_"
# The observed provider/local token ratio is smoothed and kept within sane bounds.
TOKEN_RATIO_WEIGHT = 0.5
TOKEN_RATIO_BOUNDS = (0.25, 4.0)
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


def _turn_lock(session_id: uuid.UUID, turn_id: uuid.UUID) -> AgentSession:
    """Lock the session row for a write of `turn_id`; `TurnLeaseLost` if another turn holds it.

    Every write a turn makes goes through this inside its transaction, so a turn that lost its
    lease (its process stalled past the expiry and another turn began) cannot write into the
    history the new turn now owns. The session row is always the first lock a turn write takes.
    """
    session = AgentSession.objects.select_for_update().get(pk=session_id)
    if session.current_turn_id != turn_id:
        raise TurnLeaseLost
    return session


# ---------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------
def agent_token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a plain SHA-256 suffices (no slow KDF needed).
    return hashlib.sha256(raw.encode()).hexdigest()


def agent_token_create(*, name: str) -> tuple[AgentToken, str]:
    """Create a token for an agent client; returns the row and the raw token (shown once)."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(name=name, token_hash=agent_token_hash(raw), prefix=raw[:10])
    return token, raw


def agent_token_authenticate(*, raw: str) -> AgentToken | None:
    """The active token matching `raw`, with `last_used_at` refreshed; None if none matches."""
    if not raw:
        return None
    token = AgentToken.objects.filter(token_hash=agent_token_hash(raw), revoked_at__isnull=True).first()
    if token is not None:
        now = timezone.now()
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def agent_token_revoke(*, token: AgentToken) -> None:
    AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------
def _seq_next(session_id: uuid.UUID) -> int:
    AgentSession.objects.filter(pk=session_id).update(last_seq=F("last_seq") + 1)
    return AgentSession.objects.filter(pk=session_id).values_list("last_seq", flat=True).get()


def event_emit(*, session_id: uuid.UUID, type: str, payload: dict[str, Any]) -> SessionEvent:
    """Write one event with the session's next `seq`; it is announced when the transaction commits."""
    with transaction.atomic():
        seq = _seq_next(session_id)
        event = SessionEvent.objects.create(session_id=session_id, seq=seq, type=type, payload=payload)
        announce_on_commit(event.as_frame())
    return event


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------
def session_create(
    *,
    owner: AgentToken | None,
    title: Any = None,
    model: Any = None,
    system_prompt: Any = None,
    context_window: Any = None,
    compact_threshold: Any = None,
    tools: Any = None,
    settings: Any = None,
    reserved_tool_names: Iterable[str] = (),
) -> AgentSession:
    """Validate and create a session. Raises `validation.SpecError` naming the bad field."""
    fields = session_fields_clean(
        title=title,
        model=model,
        system_prompt=system_prompt,
        context_window=context_window,
        compact_threshold=compact_threshold,
    )
    clean_settings = settings_clean(settings)
    clean_tools = client_tools_clean(tools if tools is not None else [], reserved_names=reserved_tool_names)
    model_name = fields.get("model") or default_model()
    return AgentSession.objects.create(
        owner=owner,
        title=fields.get("title", ""),
        model=model_name,
        system_prompt=fields.get("system_prompt", ""),
        context_window=fields.get("context_window") or context_window_for(model_name),
        compact_threshold=fields.get("compact_threshold", 0.8),
        settings=clean_settings,
        client_tools=clean_tools,
    )


def default_model() -> str:
    if django_settings.PALIMPSEST_PROVIDER == "scripted":
        return "scripted"
    return django_settings.PALIMPSEST_DEFAULT_MODEL


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------
def _message_write(
    *,
    session_id: uuid.UUID,
    epoch: int,
    role: str,
    content: list[dict],
    turn_id: uuid.UUID | None,
    metadata: dict | None = None,
) -> Message:
    AgentSession.objects.filter(pk=session_id).update(
        next_position=F("next_position") + 1, last_activity_at=timezone.now()
    )
    position = AgentSession.objects.filter(pk=session_id).values_list("next_position", flat=True).get() - 1
    return Message.objects.create(
        session_id=session_id,
        position=position,
        epoch=epoch,
        role=role,
        content=content,
        token_estimate=estimate_json_tokens(content),
        turn_id=turn_id,
        metadata=metadata or {},
    )


def _dangling_tool_uses(session: AgentSession) -> list[str]:
    """Ids of tool_use blocks in the epoch's last message that never got a result."""
    last = Message.objects.filter(session=session, epoch=session.epoch).order_by("-position").first()
    if last is None or last.role != MessageRole.ASSISTANT:
        return []
    return [b["id"] for b in last.content if isinstance(b, dict) and b.get("type") == "tool_use"]


# ---------------------------------------------------------------------------
# Turns
# ---------------------------------------------------------------------------
def _lease_until() -> Any:
    return timezone.now() + timedelta(seconds=django_settings.PALIMPSEST_TURN_LEASE_SECONDS)


def turn_begin(*, session_id: uuid.UUID, content: str, request_id: Any = None) -> Turn:
    """Take the session's turn lease, store the user's message and announce the turn.

    Raises `TurnInProgress` while another turn holds an unexpired lease. A history left with
    unanswered tool calls by a crashed turn is repaired first (each gets an error result), so
    the next request is valid.
    """
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        now = timezone.now()
        if session.current_turn_id and session.lease_expires_at and session.lease_expires_at > now:
            raise TurnInProgress
        if session.current_turn_id:
            Turn.objects.filter(pk=session.current_turn_id, ended_at__isnull=True).update(
                ended_at=now, stop_reason="error", error="lease expired"
            )
        dangling = _dangling_tool_uses(session)
        if dangling:
            _message_write(
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
            lease_expires_at=_lease_until(),
            cancel_requested=False,
            status=SessionStatus.RUNNING,
        )
        blocks = [{"type": "text", "text": content}]
        _message_write(
            session_id=session.id, epoch=session.epoch, role=MessageRole.USER, content=blocks, turn_id=turn.id
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
            lease_expires_at=_lease_until()
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


# ---------------------------------------------------------------------------
# A model step
# ---------------------------------------------------------------------------
def model_call_record(*, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData) -> ModelCall:
    return ModelCall.objects.create(
        session_id=session_id,
        turn_id=turn_id,
        step=data.step,
        purpose=data.purpose,
        provider=data.provider,
        model=data.model,
        request=data.request_record,
        request_sha256=data.request_sha256,
        request_bytes=data.request_bytes,
        stable_prefix_bytes=data.stable_prefix_bytes,
        estimated_prompt_tokens=data.estimated_prompt_tokens,
        predicted_prompt_tokens=data.predicted_prompt_tokens,
        response=data.response,
        stop_reason=data.stop_reason,
        input_tokens=data.usage.get("input_tokens", 0),
        output_tokens=data.usage.get("output_tokens", 0),
        cache_creation_input_tokens=data.usage.get("cache_creation_input_tokens", 0),
        cache_read_input_tokens=data.usage.get("cache_read_input_tokens", 0),
        error=data.error,
        started_at=data.started_at,
        duration_ms=data.duration_ms,
        first_token_ms=data.first_token_ms,
    )


def assistant_step_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    content: list[dict],
    call: ModelCallData,
    tool_calls: list[PlannedToolCall],
) -> Message | None:
    """Store the model's answer, its usage and the tool calls it asks for, and announce them.

    Returns the stored assistant message, or None when the answer had no content (the call and
    its usage are still recorded): an empty assistant message would make every later request
    invalid. Raises `TurnLeaseLost` (writing nothing) if the turn lost its lease.
    """
    usage = call.usage
    prompt_tokens = (
        usage.get("input_tokens", 0)
        + usage.get("cache_creation_input_tokens", 0)
        + usage.get("cache_read_input_tokens", 0)
    )
    with transaction.atomic():
        session = _turn_lock(session_id, turn_id)
        model_call_record(session_id=session_id, turn_id=turn_id, data=call)
        message = None
        if content:
            message = _message_write(
                session_id=session_id,
                epoch=epoch,
                role=MessageRole.ASSISTANT,
                content=content,
                turn_id=turn_id,
            )
        ratio = session.token_ratio
        if call.estimated_prompt_tokens > 0 and prompt_tokens > 0:
            observed = prompt_tokens / call.estimated_prompt_tokens
            ratio = (1 - TOKEN_RATIO_WEIGHT) * ratio + TOKEN_RATIO_WEIGHT * observed
            ratio = min(max(ratio, TOKEN_RATIO_BOUNDS[0]), TOKEN_RATIO_BOUNDS[1])
        AgentSession.objects.filter(pk=session_id).update(
            last_prompt_tokens=prompt_tokens,
            last_estimated_tokens=call.estimated_prompt_tokens,
            token_ratio=ratio,
        )
        if message is not None:
            event_emit(session_id=session_id, type="assistant.message", payload={"content": content})
        event_emit(
            session_id=session_id,
            type="usage",
            payload={
                "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0),
                "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
                "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
                "estimated_next_prompt_tokens": prompt_tokens
                + round(ratio * (message.token_estimate if message is not None else 0)),
            },
        )
        for planned in tool_calls:
            ToolCall.objects.create(
                session_id=session_id,
                turn_id=turn_id,
                tool_use_id=planned.tool_use_id,
                name=planned.name,
                input=planned.input,
                executor=planned.executor,
            )
            event_emit(
                session_id=session_id,
                type="tool.call",
                payload={
                    "tool_use_id": planned.tool_use_id,
                    "name": planned.name,
                    "input": planned.input,
                    "executor": planned.executor,
                },
            )
    return message


def tool_results_store(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, epoch: int, outcomes: list[ToolOutcome]
) -> Message:
    """Store the results of one step's tool calls as one user message and announce each result.

    Raises `TurnLeaseLost` (writing nothing) if the turn lost its lease.
    """
    with transaction.atomic():
        _turn_lock(session_id, turn_id)
        blocks: list[dict] = []
        now = timezone.now()
        for outcome in outcomes:
            ToolCall.objects.filter(session_id=session_id, tool_use_id=outcome.tool_use_id).update(
                status=ToolCallStatus.DONE,
                result=outcome.raw,
                is_error=outcome.is_error,
                completed_at=now,
            )
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": outcome.tool_use_id,
                "content": outcome.content,
            }
            if outcome.is_error:
                block["is_error"] = True
            blocks.append(block)
            payload: dict[str, Any] = {
                "tool_use_id": outcome.tool_use_id,
                "name": outcome.name,
                "is_error": outcome.is_error,
                "content": outcome.content,
            }
            payload.update(outcome.extra or {})
            event_emit(session_id=session_id, type="tool.result", payload=payload)
        message = _message_write(
            session_id=session_id, epoch=epoch, role=MessageRole.USER, content=blocks, turn_id=turn_id
        )
    return message


def tool_call_submit_result(
    *, session_id: uuid.UUID, tool_use_id: str, content: Any, is_error: bool
) -> ToolCall:
    """Record a client's answer to one of its tool calls; the waiting turn picks it up.

    Raises `UnknownToolUse` if no client tool call with that id exists in the session's running
    turn, `ToolResultAlreadyGiven` if it was answered already. Nothing is changed on error.
    """
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        call = ToolCall.objects.filter(
            session_id=session_id, tool_use_id=tool_use_id, executor=ToolExecutor.CLIENT
        ).first()
        if call is None or call.turn_id != session.current_turn_id:
            raise UnknownToolUse
        if call.status != ToolCallStatus.PENDING:
            raise ToolResultAlreadyGiven
        call.status = ToolCallStatus.DONE
        call.result = content
        call.is_error = is_error
        call.completed_at = timezone.now()
        call.save(update_fields=["status", "result", "is_error", "completed_at"])
    return call


# ---------------------------------------------------------------------------
# Compaction
# ---------------------------------------------------------------------------
class CompactionConflict(Exception):
    """The session moved to another epoch meanwhile: nothing was written."""


def session_status_set(*, session_id: uuid.UUID, status: str) -> None:
    """Set the session's status and announce it (`session.status`, an addition to PROTOCOL.md:
    turn events already tell running/idle/error; this tells what no other event does, e.g.
    `compacting`)."""
    with transaction.atomic():
        AgentSession.objects.filter(pk=session_id).update(status=status)
        event_emit(session_id=session_id, type="session.status", payload={"status": status})


def compaction_warning_store(
    *, session_id: uuid.UUID, turn_id: uuid.UUID, epoch: int, estimated_tokens: int, threshold_tokens: int
) -> Message:
    """Store seed 000's pre-compaction warning as a user-role notice and announce it."""
    with transaction.atomic():
        _turn_lock(session_id, turn_id)
        message = _message_write(
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
        message = _message_write(
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
