"""The turn loop: build the request, call the model, store its answer, run the tools it asked for,
and go on until the model ends its turn, the step budget is spent, or the turn is cancelled.

A turn runs as its own asyncio task, independent of the connection that started it: a client
may disconnect and re-attach. Everything it does goes through `services` (persist, then announce
after commit). Cross-process signals (a cancel, a client's tool result written by another
process) are read from the database; in-process ones also wake the turn at once (`turn_notify`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from memory_app.prompts import COMPACTION_SUMMARY_MESSAGE
from sessions_app import selectors, services
from sessions_app.engine import compaction, tool_hooks
from sessions_app.engine.context import BuiltRequest, PreparedHistory, StoredMessage, build_request
from sessions_app.engine.db import db, db_heavy
from sessions_app.engine.providers import Provider, ProviderError, provider_for_model
from sessions_app.engine.providers.base import ModelResponse
from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.engine.tokens import estimate_text_tokens
from sessions_app.engine.tools import ToolContext, ToolError, registry, sandbox_for
from sessions_app.models import AgentSession, Message, SessionStatus, ToolExecutor

logger = logging.getLogger("palimpsest.engine")

T = TypeVar("T")
DELTA_FLUSH_SECONDS = 0.05
CANCELLED_TOOL_RESULT = "Cancelled: the turn was cancelled before this tool finished."
PREFIX_CACHE_SESSIONS = 256


class TurnCancelled(Exception):
    pass


# A turn that no longer holds its session's lease stops and writes nothing more.
LeaseLost = services.TurnLeaseLost


# ---------------------------------------------------------------------------
# In-process wake-ups and the set of running turns
# ---------------------------------------------------------------------------
_wakeups: dict[uuid.UUID, asyncio.Event] = {}
_running: set[asyncio.Task] = set()
# The previous request of each session (bytes), to measure the stable prefix.
_last_request: OrderedDict[uuid.UUID, bytes] = OrderedDict()


# Each session's prepared history, kept between turns so that a turn reads only the messages
# written since (by this process or another). Messages are never changed once stored, so the
# cache is right as long as its epoch is the session's.
HISTORY_CACHE_SESSIONS = 64
_histories: OrderedDict[uuid.UUID, PreparedHistory] = OrderedDict()


def _history_remember(session_id: uuid.UUID, history: PreparedHistory) -> None:
    _histories[session_id] = history
    _histories.move_to_end(session_id)
    while len(_histories) > HISTORY_CACHE_SESSIONS:
        _histories.popitem(last=False)


def _history_for(session_id: uuid.UUID, epoch: int) -> PreparedHistory:
    """The epoch's history, from the cache plus what was stored since (runs in the DB thread)."""
    history = _histories.get(session_id)
    if history is None or history.epoch != epoch:
        history = PreparedHistory(epoch=epoch)
    newer = Message.objects.filter(session_id=session_id, epoch=epoch, position__gt=history.last_position)
    for m in newer.only("position", "role", "content", "token_estimate").order_by("position"):
        history.append(StoredMessage(m.position, m.role, m.content, m.token_estimate))
    _history_remember(session_id, history)
    return history


def turn_notify(session_id: uuid.UUID) -> None:
    """Wake the session's running turn in this process (a tool result or a cancel was stored)."""
    event = _wakeups.get(session_id)
    if event is not None:
        event.set()


async def turns_wait_idle(timeout: float | None = None) -> None:
    """Wait until every turn started in this process has finished (tests, shutdown)."""
    if _running:
        await asyncio.wait_for(asyncio.gather(*list(_running), return_exceptions=True), timeout)


async def turn_start(
    *, session_id: uuid.UUID, content: str, request_id: Any = None, provider: Provider | None = None
) -> uuid.UUID:
    """Begin a turn (raises `services.TurnInProgress`) and run it in the background."""
    turn = await db(services.turn_begin)(session_id=session_id, content=content, request_id=request_id)
    runner = TurnRunner(session_id=session_id, turn_id=turn.id, provider=provider)
    task = asyncio.create_task(runner.run(), name=f"turn-{turn.id}")
    _running.add(task)
    task.add_done_callback(_running.discard)
    return turn.id


PREFIX_COMPARE_BLOCK = 65536


def _common_prefix_length(a: bytes, b: bytes) -> int:
    """Length of the common start of two requests: compare 64 KiB blocks (memcmp on small
    copies), then binary-search inside the first block that differs. Linear in the prefix, and
    about a millisecond for a 5 MB request."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit:
        end = min(start + PREFIX_COMPARE_BLOCK, limit)
        if a[start:end] != b[start:end]:
            low, high = start, end - 1
            while low < high:
                mid = (low + high + 1) // 2
                if a[start:mid] == b[start:mid]:
                    low = mid
                else:
                    high = mid - 1
            return low
        start = end
    return limit


@dataclass
class PendingCall:
    tool_use_id: str
    name: str
    input: dict
    executor: str
    # Set by a tool hook (e.g. an unresolvable {{stepN.field}}): the call's tool_result, not run.
    error: str | None = None


class _DeltaBuffer:
    """Coalesces streamed text into `assistant.delta` events at most every DELTA_FLUSH_SECONDS."""

    def __init__(self, session_id: uuid.UUID) -> None:
        self.session_id = session_id
        self.parts: list[str] = []
        self.last_flush = time.monotonic()

    async def add(self, text: str) -> None:
        self.parts.append(text)
        if time.monotonic() - self.last_flush >= DELTA_FLUSH_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        self.last_flush = time.monotonic()
        if self.parts:
            text, self.parts = "".join(self.parts), []
            await db(services.event_emit)(
                session_id=self.session_id, type="assistant.delta", payload={"text": text}
            )


def _normalize_tool_output(value: Any) -> str | list[dict]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return value
    return json.dumps(value, ensure_ascii=False)


class TurnRunner:
    def __init__(
        self, *, session_id: uuid.UUID, turn_id: uuid.UUID, provider: Provider | None = None
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.provider = provider
        self.steps = 0
        self.epoch = 0
        self.history = PreparedHistory()
        self.lease_lost = False
        self.wake = _wakeups.setdefault(session_id, asyncio.Event())

    # -- lifecycle ---------------------------------------------------------
    async def run(self) -> str:
        heartbeat = asyncio.create_task(self._heartbeat())
        stop_reason, error = "error", ""
        try:
            stop_reason = await self._loop()
            # A turn.cancel accepted while the last step was being stored still ends the turn as
            # cancelled: the client that sent it was promised that answer.
            if await db(services.turn_is_cancelled)(session_id=self.session_id, turn_id=self.turn_id):
                stop_reason = "cancelled"
        except TurnCancelled:
            stop_reason = "cancelled"
        except LeaseLost:
            error = "the turn lost its lease"
        except ProviderError as exc:
            error = str(exc)
            await db(services.turn_error_emit)(session_id=self.session_id, code="model_error", message=error)
        except Exception as exc:
            logger.exception("turn %s failed", self.turn_id)
            error = f"internal error: {type(exc).__name__}"
            await db(services.turn_error_emit)(
                session_id=self.session_id,
                code="internal_error",
                message="The turn failed inside the server.",
            )
        finally:
            heartbeat.cancel()
            if _wakeups.get(self.session_id) is self.wake:
                del _wakeups[self.session_id]
        await db(services.turn_finish)(
            session_id=self.session_id,
            turn_id=self.turn_id,
            stop_reason=stop_reason,
            steps=self.steps,
            error=error,
        )
        return stop_reason

    async def _heartbeat(self) -> None:
        interval = max(settings.PALIMPSEST_TURN_LEASE_SECONDS / 3, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                held = await db(services.turn_heartbeat)(session_id=self.session_id, turn_id=self.turn_id)
            except Exception:
                # A passing database error (a locked SQLite file, a dropped connection) is not a
                # lost lease: try again at the next beat, well before the lease runs out.
                logger.warning("heartbeat of turn %s failed; retrying", self.turn_id, exc_info=True)
                continue
            if not held:
                self.lease_lost = True
                self.wake.set()
                return

    async def _cancellable(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, abandoning it if the turn is cancelled or loses its lease."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                waiter = asyncio.ensure_future(self.wake.wait())
                done, _ = await asyncio.wait(
                    {task, waiter},
                    timeout=settings.PALIMPSEST_POLL_SECONDS,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                if task in done:
                    return task.result()
                self.wake.clear()
                await self._check_stop()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _check_stop(self) -> None:
        if self.lease_lost:
            raise LeaseLost
        if await db(services.turn_is_cancelled)(session_id=self.session_id, turn_id=self.turn_id):
            raise TurnCancelled

    # -- the loop ----------------------------------------------------------
    def _load(self) -> SessionSnapshot:
        session = AgentSession.objects.get(pk=self.session_id)
        snapshot = SessionSnapshot.from_session(session)
        self.epoch = session.epoch
        self.history = _history_for(self.session_id, session.epoch)
        return snapshot

    def _build(self) -> tuple[SessionSnapshot, BuiltRequest]:
        # The session row is read again every step: an operator may have changed its settings.
        snapshot = SessionSnapshot.from_session(AgentSession.objects.get(pk=self.session_id))
        built = build_request(
            session=snapshot,
            history=self.history,
            server_tools=registry.for_session(snapshot, turn_id=self.turn_id),
            max_tokens=settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
        )
        return snapshot, built

    async def _loop(self) -> str:
        snapshot = await db(self._load)()
        await db(tool_hooks.turn_started)(session=snapshot, turn_id=self.turn_id)
        provider = self.provider or provider_for_model(snapshot.model)
        retried_too_long = False
        while True:
            await self._check_stop()
            max_steps = snapshot.setting("max_steps_per_turn", default=25)
            if self.steps >= max_steps:
                return "max_steps"
            self.steps += 1
            snapshot, built = await db(self._build)()
            # Seed 000: over the threshold, the agent first gets one step with the warning (and its
            # tools, to save what it needs); the history is compacted after that step.
            compact_after = False
            estimate = compaction.estimate_prompt_tokens(snapshot, built.estimated_tokens)
            if compaction.should_compact(snapshot, built, estimate, messages=len(self.history)):
                warning = await db(services.compaction_warning_store)(
                    session_id=self.session_id,
                    turn_id=self.turn_id,
                    epoch=self.epoch,
                    estimated_tokens=estimate,
                    threshold_tokens=compaction.threshold_tokens(snapshot),
                )
                self.history.append(
                    StoredMessage(warning.position, "user", warning.content, warning.token_estimate)
                )
                snapshot, built = await db(self._build)()
                compact_after = True
            try:
                response = await self._call_model(provider, snapshot, built)
            except ProviderError as exc:
                # The estimate was wrong and the API says so: compact at once, retry that call once.
                if exc.kind != "prompt_too_long" or retried_too_long or len(self.history) < 2:
                    raise
                retried_too_long = True
                await self._compact(provider, snapshot, tokens_before=estimate)
                compact_after = False
                snapshot, built = await db(self._build)()
                response = await self._call_model(provider, snapshot, built)
            calls = self._plan_tools(snapshot, response.content)
            calls = await db_heavy(self._resolve_inputs)(snapshot, calls)
            # An empty text block (or an empty answer) would make every later request invalid.
            content = [b for b in response.content if not (b.get("type") == "text" and not b.get("text"))]
            message = await db(services.assistant_step_store)(
                session_id=self.session_id,
                turn_id=self.turn_id,
                epoch=self.epoch,
                content=content,
                call=self._call_data,
                tool_calls=[
                    services.PlannedToolCall(c.tool_use_id, c.name, c.input, c.executor) for c in calls
                ],
            )
            if message is not None:
                self.history.append(
                    StoredMessage(message.position, "assistant", content, message.token_estimate)
                )
            cancelled = False
            if calls:
                outcomes = await self._run_tools(snapshot, calls)
                stored = await db(services.tool_results_store)(
                    session_id=self.session_id, turn_id=self.turn_id, epoch=self.epoch, outcomes=outcomes
                )
                self.history.append(
                    StoredMessage(stored.position, "user", stored.content, stored.token_estimate)
                )
                cancelled = any(o.content == CANCELLED_TOOL_RESULT for o in outcomes)
            if compact_after and not cancelled:
                await self._compact(provider, snapshot, tokens_before=estimate)
            if cancelled:
                raise TurnCancelled
            if not calls:
                return "end_turn"

    async def _compact(self, provider: Provider, snapshot: SessionSnapshot, *, tokens_before: int) -> None:
        """Summarize the epoch, archive it and continue from the summary (one transaction).

        If the summary call fails, nothing changes and the error ends the turn.
        """
        await db(services.session_status_set)(session_id=self.session_id, status=SessionStatus.COMPACTING)
        summary = await self._cancellable(
            compaction.summarize(
                provider=provider, session=snapshot, history=self.history.stored, record=self._record_summary
            )
        )
        tokens_after = await db(self._estimate_after_compaction)(snapshot, summary)
        archive, message = await db(services.compaction_store)(
            session_id=self.session_id,
            turn_id=self.turn_id,
            epoch=self.epoch,
            summary=summary,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
        )
        self.epoch += 1
        self.history = PreparedHistory(
            [StoredMessage(message.position, "user", message.content, message.token_estimate)],
            epoch=self.epoch,
        )
        _history_remember(self.session_id, self.history)

    def _estimate_after_compaction(self, snapshot: SessionSnapshot, summary: str) -> int:
        """The calibrated size of the next request once the history is only the summary."""
        text = COMPACTION_SUMMARY_MESSAGE.format(summary=summary)
        after = build_request(
            session=snapshot,
            history=[StoredMessage(-1, "user", [{"type": "text", "text": text}], estimate_text_tokens(text))],
            server_tools=registry.for_session(snapshot, turn_id=self.turn_id),
            max_tokens=settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
        )
        return round((snapshot.token_ratio or 1.0) * after.estimated_tokens)

    async def _record_summary(
        self, body: dict, response: ModelResponse, purpose: str, duration_ms: int
    ) -> None:
        encoded = selectors.request_canonical_bytes(body)
        data = services.ModelCallData(
            provider=(self.provider or provider_for_model(body["model"])).name,
            model=body["model"],
            step=self.steps,
            purpose=purpose,
            request_record=body,
            request_sha256=selectors.request_sha256(body),
            request_bytes=len(encoded),
            stable_prefix_bytes=0,
            estimated_prompt_tokens=estimate_text_tokens(encoded.decode()),
            started_at=timezone.now() - timedelta(milliseconds=duration_ms),
            duration_ms=duration_ms,
            first_token_ms=None,
            response={"content": response.content, "stop_reason": response.stop_reason},
            stop_reason=response.stop_reason,
            usage=response.usage.as_dict(),
        )
        await db(services.model_call_record)(session_id=self.session_id, turn_id=self.turn_id, data=data)

    # -- the model call ----------------------------------------------------
    async def _call_model(
        self, provider: Provider, snapshot: SessionSnapshot, built: BuiltRequest
    ) -> ModelResponse:
        encoded = built.encoded
        previous = _last_request.get(self.session_id, b"")
        _last_request[self.session_id] = encoded
        _last_request.move_to_end(self.session_id)
        while len(_last_request) > PREFIX_CACHE_SESSIONS:
            _last_request.popitem(last=False)
        deltas = _DeltaBuffer(self.session_id)
        started_at, t0 = timezone.now(), time.monotonic()
        base: dict[str, Any] = {
            "provider": provider.name,
            "model": snapshot.model,
            "step": self.steps,
            "purpose": "turn",
            "request_record": built.record,
            # `encoded` is the canonical JSON of the body: this is `selectors.request_sha256(body)`.
            "request_sha256": hashlib.sha256(encoded).hexdigest(),
            "request_bytes": len(encoded),
            "stable_prefix_bytes": _common_prefix_length(previous, encoded),
            "estimated_prompt_tokens": built.estimated_tokens,
            "predicted_prompt_tokens": compaction.estimate_prompt_tokens(snapshot, built.estimated_tokens),
            "started_at": started_at,
        }
        try:
            response = await self._cancellable(provider.complete(built.body, on_text=deltas.add))
        except ProviderError as exc:
            await deltas.flush()
            data = services.ModelCallData(
                **base,
                duration_ms=int((time.monotonic() - t0) * 1000),
                first_token_ms=None,
                response=None,
                stop_reason="",
                usage={},
                error=str(exc),
            )
            await db(services.model_call_record)(session_id=self.session_id, turn_id=self.turn_id, data=data)
            raise
        await deltas.flush()
        self._call_data = services.ModelCallData(
            **base,
            duration_ms=int((time.monotonic() - t0) * 1000),
            first_token_ms=response.first_token_ms,
            response={"content": response.content, "stop_reason": response.stop_reason, **response.raw},
            stop_reason=response.stop_reason,
            usage=response.usage.as_dict(),
        )
        return response

    # -- tools -------------------------------------------------------------
    def _plan_tools(self, snapshot: SessionSnapshot, content: list[dict]) -> list[PendingCall]:
        client_names = {t["name"] for t in snapshot.client_tools}
        calls = []
        for block in content:
            if block.get("type") != "tool_use":
                continue
            executor = ToolExecutor.CLIENT if block["name"] in client_names else ToolExecutor.SERVER
            calls.append(PendingCall(block["id"], block["name"], block.get("input") or {}, executor))
        return calls

    # -- tool hooks (tool_hooks.py: observation offload, {{stepN.field}} references) -------
    def _resolve_inputs(self, snapshot: SessionSnapshot, calls: list[PendingCall]) -> list[PendingCall]:
        """Inputs as the hooks rewrite them; a call a hook refuses is answered by the server."""
        if not tool_hooks.TOOL_HOOKS or not calls:
            return calls
        resolved = tool_hooks.inputs_resolve(
            session=snapshot,
            turn_id=self.turn_id,
            inputs=[tool_hooks.ToolInput(c.tool_use_id, c.name, c.input) for c in calls],
        )
        return [
            PendingCall(
                c.tool_use_id,
                c.name,
                r.input,
                ToolExecutor.SERVER if r.error is not None else c.executor,
                r.error,
            )
            for c, r in zip(calls, resolved, strict=True)
        ]

    # -- end of tool hooks -----------------------------------------------------------------

    async def _run_tools(
        self, snapshot: SessionSnapshot, calls: list[PendingCall]
    ) -> list[services.ToolOutcome]:
        outcomes: dict[str, services.ToolOutcome] = {}
        try:
            # Server tools run one after another, in the model's order: later calls may depend on
            # what earlier ones changed (e.g. two notepad edits).
            for call in calls:
                if call.error is not None:
                    outcomes[call.tool_use_id] = services.ToolOutcome(
                        call.tool_use_id, call.name, None, call.error, True
                    )
                elif call.executor == ToolExecutor.SERVER:
                    outcomes[call.tool_use_id] = await self._cancellable(
                        self._run_server_tool(snapshot, call)
                    )
            client_calls = [c for c in calls if c.executor == ToolExecutor.CLIENT]
            if client_calls:
                outcomes.update(await self._wait_client_results(client_calls))
        except TurnCancelled:
            for call in calls:
                outcomes.setdefault(
                    call.tool_use_id,
                    services.ToolOutcome(call.tool_use_id, call.name, None, CANCELLED_TOOL_RESULT, True),
                )
        ordered = [outcomes[c.tool_use_id] for c in calls]
        if not tool_hooks.TOOL_HOOKS:
            return ordered
        return await db_heavy(tool_hooks.outcomes_process)(
            session=snapshot, turn_id=self.turn_id, outcomes=ordered
        )

    async def _run_server_tool(self, snapshot: SessionSnapshot, call: PendingCall) -> services.ToolOutcome:
        spec = registry.get(call.name)
        if spec is None or not spec.enabled(snapshot):
            message = f"Unknown tool {call.name!r}. Use one of the tools you were given."
            return services.ToolOutcome(call.tool_use_id, call.name, None, message, True)
        context = ToolContext(
            session=snapshot,
            turn_id=self.turn_id,
            step=self.steps,
            tool_use_id=call.tool_use_id,
            sandbox=sandbox_for(snapshot),
        )
        try:
            raw = await spec.handler(context, call.input)
        except ToolError as exc:
            return services.ToolOutcome(call.tool_use_id, call.name, None, str(exc), True)
        except Exception:
            logger.exception("server tool %s failed", call.name)
            message = f"The tool {call.name} failed inside the server; nothing was changed by this call."
            return services.ToolOutcome(call.tool_use_id, call.name, None, message, True)
        return services.ToolOutcome(call.tool_use_id, call.name, raw, _normalize_tool_output(raw), False)

    async def _wait_client_results(self, calls: list[PendingCall]) -> dict[str, services.ToolOutcome]:
        ids = [c.tool_use_id for c in calls]
        by_id = {c.tool_use_id: c for c in calls}
        deadline = time.monotonic() + settings.PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS
        outcomes: dict[str, services.ToolOutcome] = {}
        while True:
            answered = await db(selectors.tool_calls_answered)(session_id=self.session_id, tool_use_ids=ids)
            for tool_use_id, row in answered.items():
                content = _normalize_tool_output(row.result)
                outcomes[tool_use_id] = services.ToolOutcome(
                    tool_use_id, row.name, row.result, content, row.is_error
                )
            if len(outcomes) == len(ids):
                return outcomes
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timeout = settings.PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS
                for tool_use_id in ids:
                    if tool_use_id not in outcomes:
                        call = by_id[tool_use_id]
                        outcomes[tool_use_id] = services.ToolOutcome(
                            tool_use_id,
                            call.name,
                            None,
                            f"The client did not return a result for {call.name} within {timeout} seconds.",
                            True,
                        )
                return outcomes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), min(remaining, settings.PALIMPSEST_POLL_SECONDS))
            self.wake.clear()
            try:
                await self._check_stop()
            except TurnCancelled:
                for tool_use_id in ids:
                    if tool_use_id not in outcomes:
                        call = by_id[tool_use_id]
                        outcomes[tool_use_id] = services.ToolOutcome(
                            tool_use_id, call.name, None, CANCELLED_TOOL_RESULT, True
                        )
                return outcomes
