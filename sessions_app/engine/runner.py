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
import logging
import uuid
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import replace
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions_app import selectors, services
from sessions_app.budgets import BUDGET_REACHED
from sessions_app.common.content import nul_free
from sessions_app.common.db import db, db_heavy, db_lease
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.types import ModelCallData, PlannedToolCall
from sessions_app.engine import records
from sessions_app.engine.budget_check import BudgetReached, budget_guard
from sessions_app.engine.compaction import budget, tiers
from sessions_app.engine.context import BuiltRequest, PreparedHistory, StoredMessage, build_request
from sessions_app.engine.contract import SessionSnapshot, Turns
from sessions_app.engine.deltas import DeltaBuffer
from sessions_app.engine.features import features
from sessions_app.engine.history import history_for, history_forget, history_remember, history_view_refresh
from sessions_app.engine.prefix import RequestMark, digest_remember, request_mark
from sessions_app.engine.providers import Provider, ProviderError, provider_for_model
from sessions_app.engine.providers.base import ModelResponse
from sessions_app.engine.tool_dispatch import (
    CANCELLED_TOOL_RESULT,
    PendingCall,
    ToolDispatch,
    TurnCancelled,
    tool_calls_plan,
)
from sessions_app.engine.tool_hooks import turn_started as tool_hooks_turn_started
from sessions_app.message_content import resolved
from sessions_app.models import ToolExecutor
from sessions_app.process_tasks import task_in_loop

logger = logging.getLogger("palimpsest.engine")

T = TypeVar("T")
# A turn that no longer holds its session's lease stops and writes nothing more.
LeaseLost = services.TurnLeaseLost


# ---------------------------------------------------------------------------
# In-process wake-ups and the set of running turns
# ---------------------------------------------------------------------------
_wakeups: dict[uuid.UUID, asyncio.Event] = {}
_running: set[asyncio.Task] = set()
_turn_tasks: dict[uuid.UUID, asyncio.Task] = {}


def turn_running_here(turn_id: uuid.UUID) -> bool:
    """Whether this process runs the turn: its lease running out means a stall, not a death."""
    task = _turn_tasks.get(turn_id)
    return task is not None and not task.done()


def turn_notify(session_id: uuid.UUID) -> None:
    """Wake the session's running turn in this process (a tool result or a cancel was stored)."""
    event = _wakeups.get(session_id)
    if event is not None:
        event.set()


# ---------------------------------------------------------------------------
# The poll of waiting turns for what another process wrote
# ---------------------------------------------------------------------------
# A cancel accepted by another process (or a turn taken over there) reaches a runner of this one
# only through the database. The runners waiting on something (a model call, a tool) are asked
# about together: one query every PALIMPSEST_POLL_SECONDS per process (`turns_stop_asked`),
# whatever the number of turns, and only those whose row says so are woken to look (one query
# each, `check_stop`). Each used to poll on its own: 500 turns waiting on a slow model were 500
# queries a second on the database threads. Runner -> how many of its waits are under way.
_waiting: dict[TurnRunner, int] = {}
_watcher: asyncio.Task | None = None


@contextlib.contextmanager
def _watched(runner: TurnRunner) -> Iterator[None]:
    """While the block runs, `runner` is woken when the database says another process stopped
    its turn (asked to cancel it, or took its lease)."""
    _waiting[runner] = _waiting.get(runner, 0) + 1
    _watcher_ensure()
    try:
        yield
    finally:
        if _waiting[runner] == 1:
            del _waiting[runner]
        else:
            _waiting[runner] -= 1


def _watcher_ensure() -> None:
    global _watcher
    _watcher = task_in_loop(_watcher, _watch_forever, "palimpsest-turn-watch")


async def _watch_forever() -> None:
    while _waiting:
        await asyncio.sleep(settings.PALIMPSEST_POLL_SECONDS)
        await turns_watch_once()


async def turns_watch_once() -> None:
    """One round of the poll: wake the waiting runners whose turn another process stopped."""
    runners = list(_waiting)
    if not runners:
        return
    turns = [(r.session_id, r.turn_id, r.holder) for r in runners]
    try:
        asked = await db(services.turns_stop_asked)(turns=turns)
    except Exception:
        # A passing database error (a locked SQLite file, a dropped connection): each runner
        # looks for itself this time, as it would at the next round.
        logger.warning("polling the running turns failed; each looks for itself", exc_info=True)
        asked = set(turns)
    for runner, turn in zip(runners, turns, strict=True):
        if turn in asked:
            runner.wake.set()


async def turns_wait_idle(timeout: float | None = None) -> None:
    """Wait until every turn started in this process has finished (tests, shutdown)."""
    if _running:
        await asyncio.wait_for(asyncio.gather(*list(_running), return_exceptions=True), timeout)


async def turn_start(
    *, session_id: uuid.UUID, content: str, request_id: Any = None, provider: Provider | None = None
) -> uuid.UUID:
    """Begin a turn (raises `services.TurnInProgress`) and run it in the background. A message
    that cannot fit the session's window at all, whatever is masked or summarized, is refused
    (`budget.ContextWindowTooSmall`) before anything is stored.

    The check, the start and the load of the turn's first request are one call on a database
    thread (`TurnRunner.open`): each hop to a thread and back costs more than most queries."""
    if len(content) >= ESTIMATE_INLINE_MAX_CHARS:
        # A long text is counted off the database threads, which every session's writes share.
        estimate = await asyncio.to_thread(budget.message_estimate, content)
    else:
        # A short one here, on the event loop: the tokenizer's first use in a call on a database
        # thread costs many times its use here (`context._text_tokens`).
        estimate = budget.message_estimate(content)
    runner = TurnRunner(session_id=session_id, turn_id=uuid.uuid4(), provider=provider)
    # The runner takes the session's wake-ups before its turn begins: a cancel accepted the
    # moment the start commits wakes its first model call at once (the start does not check
    # for one afterwards). If the turn cannot begin, the wake-ups go back to whoever had them,
    # with any notice that came meanwhile.
    before = _wakeups.get(session_id)
    _wakeups[session_id] = runner.wake
    try:
        await db(runner.open)(content=content, request_id=request_id, estimate=estimate)
    except BaseException as exc:
        if _wakeups.get(session_id) is runner.wake:
            if before is None:
                del _wakeups[session_id]
            else:
                _wakeups[session_id] = before
                if runner.wake.is_set():
                    before.set()
        if isinstance(exc, services.TurnNeedsRepair):
            # The session's turn lost its process while it waited for a client's tool results:
            # it is taken over here (the answer may still come), and this message is refused.
            await turn_repair_if_dead(session_id=session_id, provider=provider)
        raise
    runner.start()
    return runner.turn_id


async def turn_repair_if_dead(*, session_id: uuid.UUID, provider: Provider | None = None) -> str | None:
    """Repair the session's turn if its process died (its lease ran out, or its holder on this
    host is gone: `services.lease_lapsed`): `"resumed"` when this process took the turn over (it
    waits here for the client's tool results, then goes on), `"closed"` when it was ended, None
    when there was nothing to repair. Cheap when the lease is live: one read."""
    lease = await db(selectors.turn_lease)(session_id=session_id)
    if lease is None or not services.lease_lapsed(
        current_turn_id=lease.turn_id,
        expires_at=lease.expires_at,
        host=lease.host,
        pid=lease.pid,
        now=timezone.now(),
    ):
        return None
    holder = uuid.uuid4()
    repair = await db(services.turn_repair)(session_id=session_id, holder=holder, alive=turn_running_here)
    if repair is None:
        return None
    if not repair.resumed:
        logger.info("turn %s of session %s ended: its process stopped", repair.turn_id, session_id)
        return "closed"
    logger.info("turn %s of session %s taken over: its process stopped", repair.turn_id, session_id)
    runner = TurnRunner(
        session_id=session_id,
        turn_id=repair.turn_id,
        provider=provider,
        holder=holder,
        resume=[
            PendingCall(
                c.tool_use_id,
                c.name,
                c.input,
                c.executor,
                # A server tool was running when the process died: it is not run twice. A step
                # that waited for approvals and had not begun runs here (`rerun_server`).
                None
                if c.executor == ToolExecutor.CLIENT or repair.rerun_server
                else services.SERVER_STOPPED_TOOL_RESULT,
                approval=c.approval if repair.rerun_server else "",
            )
            for c in repair.calls
        ],
        steps=repair.steps,
    )
    runner.start()
    return "resumed"


async def turn_waiting(*, session_id: uuid.UUID, taken_over: bool = False) -> dict[str, Any]:
    """What `session.attached` says of the session's turn (PROTOCOL.md v1.2): `pending_tool_calls`,
    the client tool calls it waits for, `pending_approvals` (docs/clients.md), its calls waiting for
    an approval, and `resumes_at` when the turn's process died and a live
    process resumes it: now when `taken_over` (the caller's repair just took it over here) or its
    holder is known gone; its lease's expiry when its holder has stopped renewing the lease
    (`services.lease_takeover_at`). A turn this process runs, or whose holder keeps its lease,
    has no `resumes_at`; a turn asked to cancel waits for nothing."""
    lease = await db(selectors.turn_lease)(session_id=session_id)
    if lease is None or lease.cancel_requested:
        return {"pending_tool_calls": [], "pending_approvals": []}
    calls, asked = await db(selectors.turn_calls_waiting)(session_id=session_id, turn_id=lease.turn_id)
    waiting: dict[str, Any] = {"pending_tool_calls": calls, "pending_approvals": asked}
    now = timezone.now()
    if taken_over:
        resumes_at = now
    elif turn_running_here(lease.turn_id):
        resumes_at = None
    else:
        resumes_at = services.lease_takeover_at(
            expires_at=lease.expires_at, host=lease.host, pid=lease.pid, now=now
        )
    if (calls or asked) and resumes_at is not None:
        waiting["resumes_at"] = resumes_at.isoformat()
    return waiting


def register_task(coroutine: Coroutine[Any, Any, str], turn_id: uuid.UUID) -> None:
    """Run a turn (or an operator's compaction) in the background, known to `turn_wait`."""
    task = asyncio.create_task(coroutine, name=f"turn-{turn_id}")
    _running.add(task)
    _turn_tasks[turn_id] = task
    task.add_done_callback(_running.discard)
    task.add_done_callback(lambda _: _turn_tasks.pop(turn_id, None))


async def turn_wait(turn_id: uuid.UUID) -> str | None:
    """The stop reason of a turn started in this process, once it ends (None if it is not one of
    this process's running turns). Cancelling the waiter does not cancel the turn."""
    task = _turn_tasks.get(turn_id)
    if task is None:
        return None
    return await asyncio.shield(task)


class EngineTurns:
    """`contract.Turns`: how a tool runs another session's turn (a sub-session's, for its
    parent's call) without naming the engine."""

    async def start(self, *, session_id: uuid.UUID, content: str) -> uuid.UUID:
        return await turn_start(session_id=session_id, content=content)

    async def wait(self, turn_id: uuid.UUID) -> None:
        await turn_wait(turn_id)

    async def cancel(self, *, session_id: uuid.UUID, turn_id: uuid.UUID, wait_seconds: float) -> None:
        with contextlib.suppress(services.NoTurnInProgress):
            await db(services.turn_cancel_request)(session_id=session_id)
        turn_notify(session_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(turn_wait(turn_id), wait_seconds)


TURNS = EngineTurns()


# A request with more than this left to hash (for its record) is hashed in a thread, during
# the model call.
HASH_INLINE_MAX_BYTES = 256 * 1024


async def _digest_take(built: BuiltRequest, mark: RequestMark, hashed: asyncio.Future) -> None:
    """The request's SHA-256 for its record, once hashed; its checkpoints kept for the next."""
    digest, checkpoints = await hashed
    built.sha256_known(digest)
    digest_remember(mark, checkpoints)


# Content larger than this (characters of JSON, roughly) is counted in a worker thread.
ESTIMATE_INLINE_MAX_CHARS = 65_536


async def _estimate_off_the_db_thread(content: list[dict]) -> int:
    """A message's token estimate, counted before its write goes to Django's shared database
    thread (where counting a large text would hold up every session's writes)."""
    if sum(len(str(b.get("text") or b.get("content") or b.get("input") or "")) for b in content) < (
        ESTIMATE_INLINE_MAX_CHARS
    ):
        return estimate_json_tokens(content)
    return await asyncio.to_thread(estimate_json_tokens, content)


class TurnRunner:
    def __init__(
        self,
        *,
        session_id: uuid.UUID,
        turn_id: uuid.UUID,
        provider: Provider | None = None,
        holder: uuid.UUID | None = None,
        resume: list[PendingCall] | None = None,
        steps: int = 0,
    ) -> None:
        """`holder` names this runner's lease (`services.lease_hold`). `resume`: the turn is taken
        over from a process that died while its last step (`steps` made so far) waited for these
        calls; the runner answers them first, then goes on as usual."""
        self.session_id = session_id
        self.turn_id = turn_id
        self.provider = provider
        self.holder = holder or uuid.uuid4()
        self.resume = resume
        self.steps = steps
        self.epoch = 0
        self.history = PreparedHistory()
        self.lease_lost = False
        # Its own: a runner that lost the lease (it stalled, and this one took the turn over) must
        # not take the session's wake-ups with it when it ends. In-process wake-ups reach it once
        # it is started (`start`), or from its start's commit on (`turn_start`): a runner whose
        # turn could not begin gives them back.
        self.wake = asyncio.Event()
        self.features = features()
        self.turns: Turns = TURNS
        self.tools = ToolDispatch(turn=self, features=self.features)
        self.compactor = tiers.Compactor(self)
        # What `open` read and built with the turn's start, for its first step (`prebuilt_take`).
        self.prebuilt: tuple[SessionSnapshot, BuiltRequest] | None = None
        # The stop reason when the last step's store ended the turn too (`assistant_step_store_last`).
        self.finished: str | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        """Run the turn in the background, woken by this process's `turn_notify`."""
        _wakeups[self.session_id] = self.wake
        register_task(self.run(), self.turn_id)

    def open(self, *, content: str, request_id: Any, estimate: int | None) -> None:
        """Begin the turn (`services.turn_begin`, with the check that the message fits the window
        under the same row lock), then load its history and build its first request, in one call
        on a database thread (runs there). `estimate`: the message's, when counted already."""
        if estimate is None:
            estimate = budget.message_estimate(content)
        counted = estimate
        locked: list[SessionSnapshot] = []
        written: list[StoredMessage] = []

        def admit(session: Any) -> None:
            # The row is read and locked in this call, which builds the first request.
            snapshot = self.features.snapshot(session, with_notepad=True)
            tiers.message_admit(snapshot, counted, feature_set=self.features)
            locked.append(snapshot)

        services.turn_begin(
            session_id=self.session_id,
            content=content,
            request_id=request_id,
            token_estimate=counted,
            holder=self.holder,
            turn_id=self.turn_id,
            admit=admit,
            stored=written.append,
        )
        # The row as the start left it, without reading it again: the start changed only the
        # lease, the status and the counters, and reset the compaction breaker.
        snapshot = locked[0]
        if snapshot.compaction_failures:  # read before the update (a row that was not idle)
            snapshot = replace(snapshot, compaction_failures=0)
        self.epoch = snapshot.epoch
        # The user's message is the epoch's newest: only this turn writes after it.
        self.history = history_for(
            self.session_id, snapshot.epoch, feature_set=self.features, newest=written[0]
        )
        self.compactor.turn_start = self.history.last_position
        if self.features.hooks:
            tool_hooks_turn_started(hooks=self.features.hooks, session=snapshot, turn_id=self.turn_id)
        self.prebuilt = (snapshot, self.build_with(snapshot, self.history))

    def prebuilt_take(self) -> tuple[SessionSnapshot, BuiltRequest] | None:
        prebuilt, self.prebuilt = self.prebuilt, None
        return prebuilt

    async def run(self) -> str:
        services.lease_hold(session_id=self.session_id, holder=self.holder)
        heartbeat = asyncio.create_task(self._heartbeat())
        stop_reason, error = "error", ""
        try:
            stop_reason = await self._loop()
            if self.finished is not None:  # its last step's store ended it
                return self.finished
            # A turn.cancel accepted while the last step was being stored still ends the turn as
            # cancelled: the client that sent it was promised that answer.
            if await db(services.turn_is_cancelled)(session_id=self.session_id, turn_id=self.turn_id):
                stop_reason = "cancelled"
        except TurnCancelled:
            stop_reason = "cancelled"
        except BudgetReached:
            # Before a model call: what the turn did so far is stored (DESIGN.md, "Budgets").
            stop_reason = BUDGET_REACHED
        except LeaseLost:
            error = "the turn lost its lease"
        except ProviderError as exc:
            error = str(exc)
            await db(services.turn_error_emit)(session_id=self.session_id, code="model_error", message=error)
        except budget.ContextWindowTooSmall as exc:
            error = str(exc)
            await db(services.turn_error_emit)(session_id=self.session_id, code=exc.code, message=error)
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
                # On the lease thread: a busy pool of database threads must not let a live turn's
                # lease run out, or another process would repair it.
                held = await db_lease(services.turn_heartbeat)(
                    session_id=self.session_id, turn_id=self.turn_id
                )
            except Exception:
                # A passing database error (a locked SQLite file, a dropped connection) is not a
                # lost lease: try again at the next beat, well before the lease runs out.
                logger.warning("heartbeat of turn %s failed; retrying", self.turn_id, exc_info=True)
                continue
            if not held:
                self.lease_lost = True
                self.wake.set()
                return

    async def cancellable(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, abandoning it if the turn is cancelled or loses its lease: woken at
        once by this process (`turn_notify`, the heartbeat), or by the poll of the waiting turns
        for what other processes wrote (`turns_watch_once`)."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                waiter = asyncio.ensure_future(self.wake.wait())
                with _watched(self):
                    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if task in done:
                    return task.result()
                self.wake.clear()
                await self.check_stop()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def check_stop(self) -> None:
        if self.lease_lost:
            raise LeaseLost
        if await db(services.turn_is_cancelled)(session_id=self.session_id, turn_id=self.turn_id):
            raise TurnCancelled

    # -- the loop ----------------------------------------------------------
    def _load(self) -> SessionSnapshot:
        session = selectors.session_get(session_id=self.session_id)
        snapshot = self.features.snapshot(session)
        self.epoch = session.epoch
        self.history = history_for(self.session_id, session.epoch, feature_set=self.features)
        self.compactor.turn_start_find()
        return snapshot

    def build(self) -> tuple[SessionSnapshot, BuiltRequest]:
        """The next request (runs in a DB thread). The session row is read again every step: an
        operator may have changed its settings."""
        snapshot = self.features.snapshot(
            selectors.session_get(session_id=self.session_id), with_notepad=True
        )
        return snapshot, self.build_with(snapshot, self.history)

    def build_with(
        self,
        snapshot: SessionSnapshot,
        history: PreparedHistory,
        *,
        max_tokens: int | None = None,
        question: bool = False,
        keep: bool = True,
    ) -> BuiltRequest:
        """`history` as a request of this turn (runs in a DB thread: sections read the ORM);
        `question`: its last message is a question for this call only (`build_request`);
        `keep`: what the request pins or anchors for the epoch is stored (False: an estimate's
        request of a history the session does not have)."""
        built = build_request(
            session=snapshot,
            history=history,
            server_tools=self.features.tools_for_session(snapshot, turn_id=self.turn_id),
            max_tokens=max_tokens or settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
            sections=self.features.sections,
            question=question,
        )
        if keep and (built.pins_new is not None or built.anchors_new is not None):
            # The epoch's first request (or a section switched on inside it): what the sections
            # pinned is kept for the rest of the epoch; so is a change anchored in its history.
            services.session_context_pins_store(
                session_id=self.session_id,
                epoch=snapshot.epoch,
                sections=built.pins_new,
                anchors=built.anchors_new,
            )
        return built

    async def _loop(self) -> str:
        # A turn begun by `open` has its snapshot, history and first request already, and no
        # cancel to check for yet (its start cleared the flag a moment ago; a cancel accepted
        # since wakes the model call, or ends the turn as its last step is stored).
        checked = self.prebuilt is not None
        if self.prebuilt is not None:
            snapshot = self.prebuilt[0]
            if await self.features.tool_sources_ready(snapshot):
                # A tool source was not ready when the first request was built (an MCP server
                # still starting): it is built again, with the tools offered now.
                self.prebuilt = None
        else:
            snapshot = await db(self._load)()
            if self.features.hooks and self.resume is None:
                await db(tool_hooks_turn_started)(
                    hooks=self.features.hooks, session=snapshot, turn_id=self.turn_id
                )
        provider = self.provider or provider_for_model(
            snapshot.model,
            scripted_rules=self.features.scripted_rules,
            context_openings=self.features.context_openings,
        )
        if self.resume:
            cancelled, ends_turn = await self._calls_answer(snapshot, self.resume)
            if cancelled:
                raise TurnCancelled
            if ends_turn:
                return "end_turn"
        while True:
            if not checked:
                await self.check_stop()
            checked = False
            if self.steps >= snapshot.setting("max_steps_per_turn"):
                return "max_steps"
            self.steps += 1
            try:
                prepared = await self.compactor.prepare(provider)
                snapshot = prepared.snapshot
                built = await self.budget_guard(snapshot, prepared.built)
            except BudgetReached:
                self.steps -= 1  # the step's call was not made
                raise
            try:
                response, call_data, delta_text = await self._call_model(provider, snapshot, built)
            except ProviderError as exc:
                # The estimate was wrong and the API says so: apply the tiers at once, retry once
                # (a call like any: checked against the budgets first).
                if exc.kind != "prompt_too_long":
                    raise
                prepared = await self.compactor.prepare(provider, force=True)
                snapshot = prepared.snapshot
                try:
                    built = await self.budget_guard(snapshot, prepared.built)
                except BudgetReached:
                    self.steps -= 1
                    raise
                response, call_data, delta_text = await self._call_model(provider, snapshot, built)
            calls = tool_calls_plan(snapshot, response.content)
            if calls:  # an answer without tool calls has no inputs for the hooks
                calls = await db_heavy(self.tools.inputs_resolve)(snapshot, calls)
                # Which server calls wait for an approval: stored so with the step.
                calls = self.tools.approvals_mark(snapshot, calls)
            # An empty text block (or an empty answer) would make every later request invalid.
            content = [b for b in response.content if not (b.get("type") == "text" and not b.get("text"))]
            token_estimate = await _estimate_off_the_db_thread(content)
            if not calls and not prepared.warned:
                # The turn's last step: stored with the turn's end, in one transaction.
                self.finished = await db(self._last_step_store)(
                    content=content,
                    call=call_data,
                    token_estimate=token_estimate,
                    delta_text=delta_text,
                    token_ratio=snapshot.token_ratio,
                )
                return self.finished
            await self._step_store(
                content=content,
                call=call_data,
                calls=calls,
                token_estimate=token_estimate,
                delta_text=delta_text,
            )
            cancelled = ends_turn = False
            if calls:
                room = self._results_room(snapshot, built, calls=len(calls))
                cancelled, ends_turn = await self._calls_answer(snapshot, calls, room_tokens=room)
            if cancelled:
                raise TurnCancelled
            if prepared.warned:
                # After the warning step the turn goes on, whatever it answered: the older history
                # (or the turn's older steps) is summarized, then the next call answers the user
                # (DESIGN.md).
                await self.compactor.compact_warned(
                    provider, snapshot, tokens_before=prepared.estimate, trigger=tiers.TRIGGER_THRESHOLD
                )
                if ends_turn:  # e.g. a child reported its result in the warning step
                    return "end_turn"
                continue
            if not calls or ends_turn:
                return "end_turn"

    def _last_step_store(
        self,
        *,
        content: list[dict],
        call: ModelCallData,
        token_estimate: int,
        delta_text: str,
        token_ratio: float | None = None,
    ) -> str:
        """Store the last step with the turn's end (`services.assistant_step_store_last`) and add
        its message to the prepared history before the transaction commits (runs in a DB thread).
        Once it commits, `turn.completed` is out and the session's next turn may begin at once,
        in another thread, from the same cached history: it must find the message there already,
        not have it appended under it. Returns the stop reason."""
        try:
            with transaction.atomic():
                message, stop_reason = services.assistant_step_store_last(
                    session_id=self.session_id,
                    turn_id=self.turn_id,
                    epoch=self.epoch,
                    content=content,
                    call=call,
                    steps=self.steps,
                    token_estimate=token_estimate,
                    delta_text=delta_text,
                    token_ratio=token_ratio,
                )
                if message is not None:
                    self.history.append(
                        StoredMessage(message.position, "assistant", content, message.token_estimate)
                    )
                    history_remember(self.session_id, self.history)  # weighed as it has grown
        except BaseException:
            history_forget(self.session_id)  # it may hold a message that was rolled back
            raise
        return stop_reason

    async def _step_store(
        self,
        *,
        content: list[dict],
        call: ModelCallData,
        calls: list[PendingCall],
        token_estimate: int,
        delta_text: str,
    ) -> None:
        """Store a step's answer and its planned tool calls, and add the answer to the prepared
        history."""
        message = await db(services.assistant_step_store)(
            session_id=self.session_id,
            turn_id=self.turn_id,
            epoch=self.epoch,
            content=content,
            call=call,
            tool_calls=[
                PlannedToolCall(c.tool_use_id, c.name, c.input, c.executor, c.approval) for c in calls
            ],
            token_estimate=token_estimate,
            delta_text=delta_text,
        )
        if message is not None:
            self.history.append(StoredMessage(message.position, "assistant", content, message.token_estimate))

    def _results_room(self, snapshot: SessionSnapshot, built: BuiltRequest, *, calls: int) -> int:
        """What each of a step's `calls` results may take (`ToolContext.room_tokens`): the window
        less what the tiers cannot free from the next request (`_irreducible_tokens`); the rest
        they make room in by masking older results and summarizing older history."""
        ratio = snapshot.token_ratio or 1.0
        return budget.results_room(
            snapshot, next_request=round(ratio * self._irreducible_tokens(built)), calls=calls
        )

    def _irreducible_tokens(self, built: BuiltRequest) -> int:
        """What the next request holds that the tiers cannot free before the warning step (local
        estimate): its fixed parts (system prompt, the sections' texts, the tools) and the
        epoch's messages but for its tool results, which masking turns into placeholders. (The
        summary frees older history only after the warning step, which must fit first.)"""
        parts = ("system", "dynamic_system", "tools", "transient")
        fixed = sum(built.breakdown.get(part, 0) for part in parts)
        kept = sum(
            m.token_estimate
            for m in self.history.stored
            if not all(b.get("type") == "tool_result" for b in m.content)
        )
        return fixed + kept

    async def _calls_answer(
        self, snapshot: SessionSnapshot, calls: list[PendingCall], *, room_tokens: int | None = None
    ) -> tuple[bool, bool]:
        """Run a step's tool calls and store their results; whether the turn was cancelled
        meanwhile, and whether a tool ends the turn. `room_tokens`: what each result may take in
        the next request (None: not known, e.g. a turn taken over from a process that died)."""
        outcomes = await self.tools.run(snapshot, calls, room_tokens=room_tokens)
        stored = await db(services.tool_results_store)(
            session_id=self.session_id,
            turn_id=self.turn_id,
            epoch=self.epoch,
            outcomes=outcomes,
            token_estimate=await _estimate_off_the_db_thread(services.tool_result_blocks(outcomes)),
        )
        self.history.append(StoredMessage(stored.position, "user", resolved(stored), stored.token_estimate))
        if any((spec := self.features.tool(c.name)) and spec.refreshes_history for c in calls):
            await db(history_view_refresh)(self.features, self.session_id, self.history)
        cancelled = any(o.content == CANCELLED_TOOL_RESULT for o in outcomes)
        return cancelled, any(o.ends_turn for o in outcomes)

    async def record_summary(
        self, body: dict, response: ModelResponse, purpose: str, duration_ms: int
    ) -> None:
        provider = (self.provider or provider_for_model(body["model"])).name  # its name only
        data = records.summary_call_data(
            provider=provider,
            step=self.steps,
            body=body,
            response=response,
            purpose=purpose,
            duration_ms=duration_ms,
        )
        await db(services.model_call_record)(session_id=self.session_id, turn_id=self.turn_id, data=data)

    async def record_summary_built(
        self, built: BuiltRequest, response: ModelResponse, duration_ms: int
    ) -> None:
        provider = (self.provider or provider_for_model(built.body["model"])).name
        data = records.summary_call_built_data(
            provider=provider,
            step=self.steps,
            built=built,
            response=response,
            duration_ms=duration_ms,
        )
        await db(services.model_call_record)(session_id=self.session_id, turn_id=self.turn_id, data=data)

    # -- the model call ----------------------------------------------------
    async def budget_guard(self, snapshot: SessionSnapshot, built: BuiltRequest) -> BuiltRequest:
        """`BudgetReached` when the budget forbids the call of `built` (its estimated input, as
        the call's record predicts it); else `built`, its `max_tokens` lowered to the output the
        budgets leave (the answer cannot pass them)."""
        room = await budget_guard(
            snapshot, input_estimate=budget.estimate_prompt_tokens(snapshot, built.estimated_tokens)
        )
        if room is not None and room < built.body["max_tokens"]:
            built = await db(self.build_with)(snapshot, self.history, max_tokens=room)
        return built

    async def _call_model(
        self, provider: Provider, snapshot: SessionSnapshot, built: BuiltRequest
    ) -> tuple[ModelResponse, ModelCallData, str]:
        """The model's answer to `built`, the record of the call to store with it, and the end of
        its streamed text not announced yet (announced with the answer, in the same write)."""
        deltas = DeltaBuffer(self.session_id, self.turn_id, self.holder)
        mark = request_mark(self.session_id, built.encoded)
        call = records.TurnCall(
            provider=provider.name,
            snapshot=snapshot,
            step=self.steps,
            built=built,
            stable_prefix_bytes=mark.stable_prefix,
            predicted_prompt_tokens=budget.estimate_prompt_tokens(snapshot, built.estimated_tokens),
        )
        # The request's hash (for its record) is taken up where the previous request's stable
        # start ends (`prefix.request_mark`), while the model answers: in a thread when what is
        # left to hash is long, off the event loop and off the step's path.
        hashed: asyncio.Future
        if mark.to_hash >= HASH_INLINE_MAX_BYTES:
            hashed = asyncio.ensure_future(asyncio.to_thread(mark.digest))
        else:  # hashed here: a future already done, not a task to run
            hashed = asyncio.get_running_loop().create_future()
            hashed.set_result(mark.digest())
        try:
            response = await self.cancellable(
                provider.complete(
                    built.body, on_text=lambda text: deltas.add(nul_free(text)), encoded=built.encoded
                )
            )
        except ProviderError as exc:
            await _digest_take(built, mark, hashed)
            await deltas.flush()
            await db(services.model_call_record)(
                session_id=self.session_id, turn_id=self.turn_id, data=call.failed(str(exc))
            )
            raise
        await _digest_take(built, mark, hashed)
        delta_text = await deltas.close()
        # What the model wrote is stored as it will be stored everywhere: without U+0000.
        response.content = nul_free(response.content)
        return response, call.answered(response), delta_text
