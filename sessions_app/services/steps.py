"""A model step: the call's record, the model's answer and its usage, the tool calls it asks for,
their results (the server's, or a client's answer)."""

from __future__ import annotations

import functools
import threading
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from sessions_app.common import metrics
from sessions_app.common.approvals import APPROVAL_PENDING, input_sha256
from sessions_app.common.caches import LRUCache
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.types import ModelCallData, PlannedToolCall, StoredMessage, ToolOutcome
from sessions_app.fastpath.counters import session_update, session_update_if
from sessions_app.fastpath.rows import object_update, objects_insert, values_insert
from sessions_app.models import (
    AgentSession,
    Message,
    MessageRole,
    ModelCall,
    RequestPart,
    SessionStatus,
    ToolCall,
    ToolCallStatus,
    ToolExecutor,
    Turn,
)
from sessions_app.services.events import events_emit, events_insert
from sessions_app.services.messages import message_insert, message_write
from sessions_app.services.turns import (
    LEASE_RELEASED,
    ToolResultAlreadyGiven,
    UnknownToolUse,
    lease_holder_expected,
    turn_lock,
)
from sessions_app.usage import SCRIPTED_PROVIDER, UsageTotals, model_price

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
    return {field: F(field) + value for field, value in _usage_added(data).items()}


def _usage_added(data: ModelCallData) -> dict[str, int]:
    """What `data`'s call adds to the session's running usage totals, by field."""
    usage = data.usage
    return {
        "usage_model_calls": 1,
        "usage_input_tokens": usage.get("input_tokens", 0) or 0,
        "usage_output_tokens": usage.get("output_tokens", 0) or 0,
        "usage_cache_creation_tokens": usage.get("cache_creation_input_tokens", 0) or 0,
        "usage_cache_read_tokens": usage.get("cache_read_input_tokens", 0) or 0,
    }


# How many request parts a process remembers having stored (a part per distinct set of tools).
REQUEST_PARTS_REMEMBERED = 1024
_parts_stored: LRUCache[str, bool] = LRUCache(maxsize=REQUEST_PARTS_REMEMBERED)
_parts_lock = threading.Lock()


def request_parts_store(parts: dict[str, str]) -> None:
    """Store the request parts a call's record names (`RequestPart`) that this process has not
    stored yet, inside the caller's transaction: one insert, which skips a part already there
    (another process's). They count as stored here once that transaction commits; the usual
    step stores none."""
    if not parts:
        return
    with _parts_lock:
        new = {digest: text for digest, text in parts.items() if _parts_stored.get(digest) is None}
    if not new:
        return
    now = timezone.now()
    RequestPart.objects.bulk_create(
        [RequestPart(sha256=digest, text=text, created_at=now) for digest, text in new.items()],
        ignore_conflicts=True,
    )

    def stored() -> None:
        with _parts_lock:
            for digest in new:
                _parts_stored.set(digest, True)

    transaction.on_commit(stored)


def _model_call_counted(data: ModelCallData) -> None:
    """Count the call in the metrics once the transaction that records it commits."""
    usage = data.usage
    totals = UsageTotals(
        model_calls=1,
        input_tokens=usage.get("input_tokens", 0) or 0,
        output_tokens=usage.get("output_tokens", 0) or 0,
        cache_creation_tokens=usage.get("cache_creation_input_tokens", 0) or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens", 0) or 0,
    )
    price = None if data.provider == SCRIPTED_PROVIDER else model_price(data.model)
    transaction.on_commit(
        lambda: metrics.model_call_observed(
            provider=data.provider,
            purpose=data.purpose,
            failed=bool(data.error),
            duration_seconds=data.duration_ms / 1000,
            uncached=totals.input_tokens,
            cache_write=totals.cache_creation_tokens,
            cache_read=totals.cache_read_tokens,
            output=totals.output_tokens,
            cost_usd=totals.cost(price),
        )
    )


def _model_call_create(*, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData) -> ModelCall:
    request_parts_store(data.request_parts)
    _model_call_counted(data)
    call = _model_call(session_id=session_id, turn_id=turn_id, data=data)
    call.save(force_insert=True)
    return call


def _model_call(*, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData) -> ModelCall:
    """`data`'s record, not saved."""
    return ModelCall(**_model_call_values(session_id=session_id, turn_id=turn_id, data=data))


def _model_call_values(
    *, session_id: uuid.UUID, turn_id: uuid.UUID | None, data: ModelCallData
) -> dict[str, Any]:
    """`data`'s record as its fields' values, by attname (every field the database does not
    number: what `rows.values_insert` takes)."""
    return {
        "session_id": session_id,
        "turn_id": turn_id,
        "step": data.step,
        "purpose": data.purpose,
        "provider": data.provider,
        "model": data.model,
        "request": data.request_record,
        "request_sha256": data.request_sha256,
        "request_bytes": data.request_bytes,
        "stable_prefix_bytes": data.stable_prefix_bytes,
        "estimated_prompt_tokens": data.estimated_prompt_tokens,
        "predicted_prompt_tokens": data.predicted_prompt_tokens,
        "response": data.response,
        "stop_reason": data.stop_reason,
        "input_tokens": data.usage.get("input_tokens", 0),
        "output_tokens": data.usage.get("output_tokens", 0),
        "cache_creation_input_tokens": data.usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": data.usage.get("cache_read_input_tokens", 0),
        "error": data.error,
        "started_at": data.started_at,
        "duration_ms": data.duration_ms,
        "first_token_ms": data.first_token_ms,
    }


def assistant_step_store(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    content: list[dict],
    call: ModelCallData,
    tool_calls: list[PlannedToolCall],
    token_estimate: int | None = None,
    delta_text: str = "",
) -> StoredMessage | None:
    """Store the model's answer, its usage and the tool calls it asks for, and announce them.

    `delta_text` is the call's streamed text not yet announced (its last `assistant.delta`,
    announced first, in the same write). Returns the stored assistant message (as the engine's
    history holds it: `message_insert`), or None when the answer had no content (the call and its
    usage are still recorded): an empty assistant message would make every later request invalid.
    Raises
    `TurnLeaseLost` (writing nothing) if the turn lost its lease.
    """
    with transaction.atomic():
        session = turn_lock(session_id, turn_id)
        written = _assistant_step_write(
            session_id,
            turn_id,
            epoch,
            content,
            call,
            tool_calls,
            token_estimate,
            delta_text,
            steps=None,
            ratio=session.token_ratio,
            cancel_requested=session.cancel_requested,
        )
    assert written is not None
    return written[0]


def assistant_step_store_last(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    content: list[dict],
    call: ModelCallData,
    steps: int,
    token_estimate: int | None = None,
    delta_text: str = "",
    token_ratio: float | None = None,
) -> tuple[StoredMessage | None, str]:
    """Store a step that asks for no tool call and end its turn, in one transaction: what
    `assistant_step_store` then `turn_finish` do, with one lock of the session row, one update
    of it and one write of the events. The turn ends `cancelled` if a cancel was accepted before
    this write (the client that sent it was promised that answer), else `end_turn`. Returns the
    message (or None) and the stop reason. Raises `TurnLeaseLost` (writing nothing) if the turn
    lost its lease. Inside a caller's transaction it opens no savepoint: its failure fails the
    caller's transaction.

    `token_ratio`: the session's token ratio as the caller read it (its snapshot of the row).
    The update of the session row then comes first and checks the row itself (this turn's lease,
    no cancel, that ratio): the row is not read before it. A row that is not so (a cancel was
    accepted, the lease was lost) is left as it was, then read and locked as without it."""
    write = functools.partial(
        _assistant_step_write,
        session_id,
        turn_id,
        epoch,
        content,
        call,
        [],
        token_estimate,
        delta_text,
        steps=steps,
    )
    with transaction.atomic(savepoint=False):
        if token_ratio is not None:
            where: dict[str, Any] = {
                "current_turn_id": turn_id,
                "cancel_requested": False,
                "token_ratio": token_ratio,
            }
            holder = lease_holder_expected(session_id)
            if holder is not None:
                where["lease_holder"] = holder
            written = write(ratio=token_ratio, cancel_requested=False, where=where)
            if written is not None:
                return written[0], "end_turn"
        session = turn_lock(session_id, turn_id)
        written = write(ratio=session.token_ratio, cancel_requested=session.cancel_requested)
    assert written is not None and written[1] is not None
    return written[0], written[1]


def _assistant_step_write(
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    epoch: int,
    content: list[dict],
    call: ModelCallData,
    tool_calls: list[PlannedToolCall],
    token_estimate: int | None,
    delta_text: str,
    *,
    steps: int | None,
    ratio: float,
    cancel_requested: bool,
    where: dict[str, Any] | None = None,
) -> tuple[StoredMessage | None, str | None] | None:
    """A step's writes inside the caller's transaction: one update of the session row (its usage,
    token ratio and counters, and with `steps`, the turn's last step, the lease released), then
    the call's record, the message, the tool calls, with `steps` the turn's end, and the events.
    `ratio` and `cancel_requested` are the row's. Returns the message and, with `steps`, the
    turn's stop reason.

    Without `where` the row is locked already and the lease checked (`turn_lock`). With it, the
    update is made only while the row has the values in `where`; when it has not, nothing is
    written and None is returned."""
    usage = call.usage
    prompt_tokens = (
        usage.get("input_tokens", 0)
        + usage.get("cache_creation_input_tokens", 0)
        + usage.get("cache_read_input_tokens", 0)
    )
    if content and token_estimate is None:
        token_estimate = estimate_json_tokens(content)
    if call.estimated_prompt_tokens > 0 and prompt_tokens > 0:
        observed = prompt_tokens / call.estimated_prompt_tokens
        ratio = (1 - TOKEN_RATIO_WEIGHT) * ratio + TOKEN_RATIO_WEIGHT * observed
        ratio = min(max(ratio, TOKEN_RATIO_BOUNDS[0]), TOKEN_RATIO_BOUNDS[1])
    events: list[tuple[str, dict[str, Any]]] = []
    if delta_text:
        events.append(("assistant.delta", {"text": delta_text}))
    if content:
        events.append(("assistant.message", {"content": content}))
    events.append(
        (
            "usage",
            {
                "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0),
                "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
                "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
                "estimated_next_prompt_tokens": prompt_tokens + round(ratio * (token_estimate or 0)),
            },
        )
    )
    for planned in tool_calls:
        events.append(
            (
                "tool.call",
                {
                    "tool_use_id": planned.tool_use_id,
                    "name": planned.name,
                    "input": planned.input,
                    "executor": planned.executor,
                },
            )
        )
    # The calls that wait for an answer (PROTOCOL.md v1.2), after every call of the step.
    for planned in tool_calls:
        if planned.approval == APPROVAL_PENDING:
            events.append(("tool.approval_requested", approval_requested_payload(planned)))
    now = timezone.now()
    # The call's usage joins the session's totals in the one update of the row.
    add = {"last_seq": len(events), **_usage_added(call)}
    assign: dict[str, Any] = {
        "last_prompt_tokens": prompt_tokens,
        "last_estimated_tokens": call.estimated_prompt_tokens,
        "token_ratio": ratio,
    }
    if content:
        add["next_position"] = 1
        assign["last_activity_at"] = now
    stop_reason = None
    if steps is not None:
        stop_reason = "cancelled" if cancel_requested else "end_turn"
        assign.update(LEASE_RELEASED, status=SessionStatus.IDLE, last_activity_at=now)
        events.append(("turn.completed", {"turn_id": str(turn_id), "stop_reason": stop_reason}))
        add["last_seq"] += 1
    if where is None:
        counters = session_update(session_id, add=add, assign=assign)
    else:
        found = session_update_if(session_id, where=where, add=add, assign=assign)
        if found is None:
            return None
        counters = found
    request_parts_store(call.request_parts)
    record = _model_call_values(session_id=session_id, turn_id=turn_id, data=call)
    values_insert(ModelCall, tuple(record), [tuple(record.values())])
    _model_call_counted(call)
    if steps is not None:
        object_update(Turn, turn_id, ended_at=now, stop_reason=stop_reason, steps=steps, error="")
        ended = stop_reason or ""
        transaction.on_commit(lambda: metrics.turn_ended(stop_reason=ended))
    message = None
    if content:
        message = message_insert(
            session_id=session_id,
            position=counters["next_position"] - 1,
            epoch=epoch,
            role=MessageRole.ASSISTANT,
            content=content,
            turn_id=turn_id,
            token_estimate=token_estimate,
        )
    objects_insert(
        [
            ToolCall(
                session_id=session_id,
                turn_id=turn_id,
                tool_use_id=planned.tool_use_id,
                name=planned.name,
                input=planned.input,
                executor=planned.executor,
                approval=planned.approval,
            )
            for planned in tool_calls
        ]
    )
    events_insert(session_id=session_id, last_seq=counters["last_seq"], events=events)
    return message, stop_reason


def approval_requested_payload(planned: PlannedToolCall) -> dict[str, Any]:
    """The `tool.approval_requested` event of a call (PROTOCOL.md v1.2), with `input_sha256`
    (docs/clients.md: an answer may carry it to be bound to the input it saw)."""
    return {
        "tool_use_id": planned.tool_use_id,
        "name": planned.name,
        "input": planned.input,
        "input_sha256": input_sha256(planned.input),
    }


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
        failed = [outcome.name for outcome in outcomes if outcome.is_error]
        if failed:
            transaction.on_commit(lambda: metrics.tool_errors_observed(names=failed))
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
