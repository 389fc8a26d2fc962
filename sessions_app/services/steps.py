"""A model step: the call's record, the model's answer and its usage, the tool calls it asks for,
their results (the server's, or a client's answer)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions_app.engine.types import ModelCallData, PlannedToolCall, ToolOutcome
from sessions_app.models import (
    AgentSession,
    Message,
    MessageRole,
    ModelCall,
    ToolCall,
    ToolCallStatus,
    ToolExecutor,
)
from sessions_app.services.events import events_emit
from sessions_app.services.messages import message_write
from sessions_app.services.turns import ToolResultAlreadyGiven, UnknownToolUse, turn_lock

# The observed provider/local token ratio is smoothed and kept within sane bounds.
TOKEN_RATIO_WEIGHT = 0.5
TOKEN_RATIO_BOUNDS = (0.25, 4.0)


def model_call_record(*, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData) -> ModelCall:
    """Store one model call's record and add its usage to the session's running totals, in one
    transaction (the totals always equal the sum over the session's recorded calls)."""
    with transaction.atomic(savepoint=False):
        call = _model_call_create(session_id=session_id, turn_id=turn_id, data=data)
        AgentSession.objects.filter(pk=session_id).update(**_usage_totals_added(data))
    return call


def _usage_totals_added(data: ModelCallData) -> dict[str, Any]:
    """The session's running usage totals with `data`'s call added (an `update()`'s arguments)."""
    usage = data.usage
    counts = {
        "usage_input_tokens": usage.get("input_tokens", 0),
        "usage_output_tokens": usage.get("output_tokens", 0),
        "usage_cache_creation_tokens": usage.get("cache_creation_input_tokens", 0),
        "usage_cache_read_tokens": usage.get("cache_read_input_tokens", 0),
    }
    return {
        "usage_model_calls": F("usage_model_calls") + 1,
        **{field: F(field) + (value or 0) for field, value in counts.items()},
    }


def _model_call_create(*, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData) -> ModelCall:
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
    token_estimate: int | None = None,
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
        session = turn_lock(session_id, turn_id)
        # The call's record; its usage joins the session's totals in the one update below.
        _model_call_create(session_id=session_id, turn_id=turn_id, data=call)
        message = None
        if content:
            message = message_write(
                session_id=session_id,
                epoch=epoch,
                role=MessageRole.ASSISTANT,
                content=content,
                turn_id=turn_id,
                token_estimate=token_estimate,
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
            **_usage_totals_added(call),
        )
        events: list[tuple[str, dict[str, Any]]] = []
        if message is not None:
            events.append(("assistant.message", {"content": content}))
        events.append(
            (
                "usage",
                {
                    "input_tokens": usage.get("input_tokens", 0),
                    "output_tokens": usage.get("output_tokens", 0),
                    "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
                    "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
                    "estimated_next_prompt_tokens": prompt_tokens
                    + round(ratio * (message.token_estimate if message is not None else 0)),
                },
            )
        )
        ToolCall.objects.bulk_create(
            ToolCall(
                session_id=session_id,
                turn_id=turn_id,
                tool_use_id=planned.tool_use_id,
                name=planned.name,
                input=planned.input,
                executor=planned.executor,
            )
            for planned in tool_calls
        )
        events += [
            (
                "tool.call",
                {
                    "tool_use_id": planned.tool_use_id,
                    "name": planned.name,
                    "input": planned.input,
                    "executor": planned.executor,
                },
            )
            for planned in tool_calls
        ]
        events_emit(session_id=session_id, events=events)
    return message


def tool_result_blocks(outcomes: list[ToolOutcome]) -> list[dict]:
    """The user message's content that answers one step's tool calls."""
    blocks: list[dict] = []
    for outcome in outcomes:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": outcome.tool_use_id,
            "content": outcome.content,
        }
        if outcome.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks


def tool_results_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    outcomes: list[ToolOutcome],
    token_estimate: int | None = None,
) -> Message:
    """Store the results of one step's tool calls as one user message and announce each result.

    Raises `TurnLeaseLost` (writing nothing) if the turn lost its lease.
    """
    with transaction.atomic():
        turn_lock(session_id, turn_id)
        blocks = tool_result_blocks(outcomes)
        now = timezone.now()
        events: list[tuple[str, dict[str, Any]]] = []
        for outcome in outcomes:
            ToolCall.objects.filter(session_id=session_id, tool_use_id=outcome.tool_use_id).update(
                status=ToolCallStatus.DONE,
                result=outcome.raw,
                is_error=outcome.is_error,
                completed_at=now,
            )
            payload: dict[str, Any] = {
                "tool_use_id": outcome.tool_use_id,
                "name": outcome.name,
                "is_error": outcome.is_error,
                "content": outcome.content,
            }
            payload.update(outcome.extra or {})
            events.append(("tool.result", payload))
        events_emit(session_id=session_id, events=events)
        message = message_write(
            session_id=session_id,
            epoch=epoch,
            role=MessageRole.USER,
            content=blocks,
            turn_id=turn_id,
            token_estimate=token_estimate,
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
        if call is None:
            raise UnknownToolUse(f"no client tool call {tool_use_id!r} exists in this session")
        if call.turn_id != session.current_turn_id:
            # Its turn ended (cancelled, ended by another process after its own stopped, or
            # gave up waiting): the model was given what `result` holds instead.
            raise UnknownToolUse(
                f"tool call {tool_use_id!r} no longer waits: the turn that made it has ended, and the "
                "model was told the call was not answered"
            )
        if call.status != ToolCallStatus.PENDING:
            raise ToolResultAlreadyGiven
        call.status = ToolCallStatus.DONE
        call.result = content
        call.is_error = is_error
        call.completed_at = timezone.now()
        call.save(update_fields=["status", "result", "is_error", "completed_at"])
    return call
