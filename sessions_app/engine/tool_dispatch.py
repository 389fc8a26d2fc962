"""A model step's tool calls: planned from the answer, rewritten by the features' hooks, run (server
tools here, one after another or, for concurrent tools, together; client tools by waiting for the
client's `tool.result`), and their outcomes processed by the hooks again before they are stored
and shown to the model."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from django.conf import settings

from sessions_app import selectors, services
from sessions_app.common.approvals import (
    ALWAYS_ASK,
    APPROVAL_APPROVED,
    APPROVAL_DENIED,
    APPROVAL_PENDING,
    policy_for,
)
from sessions_app.common.content import nul_free
from sessions_app.common.db import db, db_heavy
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.common.tool_input import tool_input_check, tool_input_text_check
from sessions_app.common.types import ToolOutcome
from sessions_app.engine import tool_hooks
from sessions_app.engine.contract import EndTurn, SessionSnapshot, ToolContext, ToolError, Turns
from sessions_app.engine.feature_set import FeatureSet
from sessions_app.models import ToolExecutor

logger = logging.getLogger("palimpsest.engine")

T = TypeVar("T")
CANCELLED_TOOL_RESULT = "Cancelled: the turn was cancelled before this tool finished."
DENIED_TOOL_RESULT = "This call of {name} was denied: it did not run."
DENIED_REASON = " The reason given: {reason}"
RESULT_TOO_LARGE = (
    "The result of {name} is about {tokens} tokens, and the next request has room for about "
    "{room} tokens of it: it was not kept. Ask for less at a time (a smaller page, range or limit, "
    "a query), or write what you need to memory first."
)
# Results longer than this (characters) are counted off the event loop.
COUNT_INLINE_MAX_CHARS = 65_536


class TurnCancelled(Exception):
    pass


@dataclass
class PendingCall:
    tool_use_id: str
    name: str
    input: dict
    executor: str
    # Set by a tool hook (e.g. an unresolvable {{stepN.field}}): the call's tool_result, not run.
    error: str | None = None
    # `pending` (or, for a turn taken over, the stored answer) when the call waits for an
    # approval before it runs (`common.approvals`); "" when it runs at once.
    approval: str = ""


class TurnControl(Protocol):
    """What tool dispatch needs of the running turn."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    steps: int
    wake: asyncio.Event
    turns: Turns

    async def cancellable(self, awaitable: Awaitable[T]) -> T: ...

    async def check_stop(self) -> None: ...


def tool_output_normalize(value: Any) -> str | list[dict]:
    """What the model is given for a tool's return value: a string, content blocks, or JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return value
    return json.dumps(value, ensure_ascii=False)


def tool_calls_plan(snapshot: SessionSnapshot, content: list[dict]) -> list[PendingCall]:
    client_names = {t["name"] for t in snapshot.client_tools}
    calls = []
    for block in content:
        if block.get("type") != "tool_use":
            continue
        executor = ToolExecutor.CLIENT if block["name"] in client_names else ToolExecutor.SERVER
        calls.append(PendingCall(block["id"], block["name"], block.get("input") or {}, executor))
    return calls


def results_fit(outcomes: list[ToolOutcome], server: set[str], room_tokens: int) -> list[ToolOutcome]:
    """The engine's guard (issue 30): a server tool's result larger than the room the next request
    has for it becomes a tool error the model can act on. Each call has `room_tokens`; what an
    earlier result of the step leaves unused goes to the later ones."""
    remaining = room_tokens * len(outcomes)
    fitted = []
    for index, outcome in enumerate(outcomes):
        allowance = remaining - room_tokens * (len(outcomes) - index - 1)
        # A token is at least a character: a short result is not counted.
        short = len(outcome.content) if isinstance(outcome.content, str) else None
        tokens = short if short is not None and short <= allowance else estimate_json_tokens(outcome.content)
        if outcome.tool_use_id in server and not outcome.is_error and tokens > allowance:
            message = RESULT_TOO_LARGE.format(name=outcome.name, tokens=tokens, room=max(allowance, 0))
            outcome = dataclasses.replace(outcome, raw=None, content=message, is_error=True, extra=None)
            tokens = estimate_json_tokens(message)
        remaining -= tokens
        fitted.append(outcome)
    return fitted


async def _every_one(tasks: Sequence[asyncio.Future[T]]) -> list[T]:
    """The tasks' results, in order, once all have ended. Cancelled, it cancels every task at
    once and raises only when each has ended: a step's concurrent calls all end before the turn
    does (a sub-session's turn before its parent's `turn.completed`), and none goes on meanwhile
    (a call waiting for a place does not take one that a cancelled call gives back).
    `asyncio.gather` does neither: cancelled, it ends as soon as one of them has ended cancelled;
    and awaiting the tasks one by one would pass the cancel to the first alone, until it ended."""
    try:
        await asyncio.wait(tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [task.result() for task in tasks]


class ToolDispatch:
    def __init__(self, *, turn: TurnControl, features: FeatureSet) -> None:
        self.turn = turn
        self.features = features
        self.room_tokens: int | None = None

    def _outcome_error(self, call: PendingCall, message: str) -> ToolOutcome:
        return ToolOutcome(call.tool_use_id, call.name, None, message, True)

    def inputs_resolve(self, snapshot: SessionSnapshot, calls: list[PendingCall]) -> list[PendingCall]:
        """Inputs as the hooks rewrite them; a call a hook refuses is answered by the server.
        Runs in a DB thread."""
        if not self.features.hooks or not calls:
            return calls
        resolved = tool_hooks.inputs_resolve(
            hooks=self.features.hooks,
            session=snapshot,
            turn_id=self.turn.turn_id,
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

    def approvals_mark(self, snapshot: SessionSnapshot, calls: list[PendingCall]) -> list[PendingCall]:
        """`calls` with the server calls whose policy is `always_ask` marked `pending`: the
        session's `settings.approvals`, then PALIMPSEST_APPROVALS_DEFAULT, then the features'
        defaults (MCP tools ask), else `always_allow`. A client's call (the client runs it) and a
        call a hook refused (it does not run) ask nothing."""
        session_policies = snapshot.setting("approvals")
        marked = []
        for call in calls:
            if call.executor == ToolExecutor.SERVER and call.error is None:
                policy = policy_for(
                    call.name,
                    session_policies if isinstance(session_policies, dict) else None,
                    settings.PALIMPSEST_APPROVALS_DEFAULT,
                    self.features.approval_defaults,
                )
                if policy == ALWAYS_ASK:
                    call = dataclasses.replace(call, approval=APPROVAL_PENDING)
            marked.append(call)
        return marked

    async def run(
        self, snapshot: SessionSnapshot, calls: list[PendingCall], *, room_tokens: int | None = None
    ) -> list[ToolOutcome]:
        """The step's outcomes, in the model's order. `room_tokens`: what each call's result may
        take in the next request (`ToolContext.room_tokens`); a server tool's result that still
        does not fit once the hooks have processed it (offloaded it) is answered with an error
        saying its size and the room."""
        self.room_tokens = room_tokens
        outcomes: dict[str, ToolOutcome] = {}
        try:
            # A step with calls that wait for an approval runs nothing before every one is
            # answered; a denied call is answered with a tool error (its reason in it).
            asked = [c for c in calls if c.approval and c.error is None and c.executor == ToolExecutor.SERVER]
            if asked:
                answers = await self._wait_approvals(asked)
                calls_run = []
                for call in calls:
                    answer = answers.get(call.tool_use_id)
                    if answer is not None and answer[0] == APPROVAL_DENIED:
                        message = DENIED_TOOL_RESULT.format(name=call.name)
                        if answer[1]:
                            message += DENIED_REASON.format(reason=answer[1])
                        call = dataclasses.replace(call, error=message)
                    calls_run.append(call)
                calls = calls_run
                await db(services.tool_calls_started)(
                    session_id=self.turn.session_id,
                    turn_id=self.turn.turn_id,
                    tool_use_ids=[c.tool_use_id for c in calls if c.executor == ToolExecutor.SERVER],
                )
            # Server tools run one after another, in the model's order: later calls may depend on
            # what earlier ones changed (e.g. two notepad edits). Consecutive calls of concurrent
            # tools (`ToolSpec.concurrent`) run together, as one place in that order.
            together: list[PendingCall] = []
            for call in calls:
                if call.error is not None:
                    outcomes[call.tool_use_id] = self._outcome_error(call, call.error)
                elif call.executor == ToolExecutor.SERVER:
                    if self._concurrent(snapshot, call):
                        together.append(call)
                        continue
                    await self._run_together(snapshot, together, outcomes)
                    together = []
                    outcomes[call.tool_use_id] = await self.turn.cancellable(
                        self._run_server_tool(snapshot, call)
                    )
            await self._run_together(snapshot, together, outcomes)
            client_calls = [c for c in calls if c.executor == ToolExecutor.CLIENT]
            if client_calls:
                outcomes.update(await self._wait_client_results(client_calls))
        except TurnCancelled:
            for call in calls:
                outcomes.setdefault(call.tool_use_id, self._outcome_error(call, CANCELLED_TOOL_RESULT))
        # A tool's output may hold U+0000 (a file read as text): stored everywhere without it.
        ordered = [
            dataclasses.replace(o, raw=nul_free(o.raw), content=nul_free(o.content))
            for o in (outcomes[c.tool_use_id] for c in calls)
        ]
        if self.features.hooks:
            ordered = await db_heavy(tool_hooks.outcomes_process)(
                hooks=self.features.hooks, session=snapshot, turn_id=self.turn.turn_id, outcomes=ordered
            )
        if room_tokens is None:
            return ordered
        server = {c.tool_use_id for c in calls if c.executor == ToolExecutor.SERVER and c.error is None}
        if sum(len(str(o.content)) for o in ordered) > COUNT_INLINE_MAX_CHARS:
            return await asyncio.to_thread(results_fit, ordered, server, room_tokens)
        return results_fit(ordered, server, room_tokens)

    def _concurrent(self, snapshot: SessionSnapshot, call: PendingCall) -> bool:
        spec = self.features.tool(call.name)
        return spec is not None and spec.concurrent and spec.enabled(snapshot)

    async def _run_together(
        self, snapshot: SessionSnapshot, calls: list[PendingCall], outcomes: dict[str, ToolOutcome]
    ) -> None:
        if not calls:
            return
        tasks = [asyncio.ensure_future(self._run_server_tool(snapshot, call)) for call in calls]
        done = await self.turn.cancellable(_every_one(tasks))
        outcomes.update((outcome.tool_use_id, outcome) for outcome in done)

    async def _run_server_tool(self, snapshot: SessionSnapshot, call: PendingCall) -> ToolOutcome:
        spec = self.features.tool(call.name)
        if spec is None and self.features.tool_sources:
            # A tool that is data (an agent's authored tool), as the session's sources give it now.
            spec = await db(self.features.sourced_tool)(snapshot, call.name)
        if spec is None or not spec.enabled(snapshot):
            refusal = spec.refusal(snapshot) if spec is not None and spec.refusal is not None else None
            return self._outcome_error(
                call, refusal or f"Unknown tool {call.name!r}. Use one of the tools you were given."
            )
        # The handler gets only input its schema accepts; anything else is answered here.
        problem = tool_input_check(spec.input_check_schema, call.input, tool=call.name)
        if problem is None and spec.text_limits:
            limits = {
                name: (limit.limit(snapshot), limit.named()) for name, limit in spec.text_limits.items()
            }
            problem = tool_input_text_check(limits, call.input, tool=call.name)
        if problem is not None:
            return self._outcome_error(call, problem)
        context = ToolContext(
            session=snapshot,
            turn_id=self.turn.turn_id,
            step=self.turn.steps,
            tool_use_id=call.tool_use_id,
            sandbox=self.features.sandbox_for(snapshot),
            turns=self.turn.turns,
            room_tokens=self.room_tokens,
            server_tool_names=self.features.static_tool_names,
        )
        try:
            raw = nul_free(await spec.handler(context, call.input))
        except ToolError as exc:
            return self._outcome_error(call, str(exc))
        except Exception:
            logger.exception("server tool %s failed", call.name)
            return self._outcome_error(
                call, f"The tool {call.name} failed inside the server; nothing was changed by this call."
            )
        if isinstance(raw, EndTurn):
            return ToolOutcome(
                call.tool_use_id,
                call.name,
                raw.result,
                tool_output_normalize(raw.result),
                False,
                ends_turn=True,
            )
        return ToolOutcome(
            call.tool_use_id, call.name, raw, tool_output_normalize(raw), False, fitted=spec.fits_room
        )

    async def _wait_approvals(self, calls: list[PendingCall]) -> dict[str, tuple[str, str]]:
        """Each call's answer (`approved` or `denied`, the reason), once all are answered (read
        from their rows: an answer given to any process counts). The wait holds no thread: the
        turn's wake event (an answer or a cancel in this process) or the poll. A cancel raises
        `TurnCancelled`."""
        ids = [c.tool_use_id for c in calls]
        while True:
            answers = await db(selectors.tool_call_approvals)(
                session_id=self.turn.session_id, tool_use_ids=ids
            )
            if all(answers.get(i, ("",))[0] in (APPROVAL_APPROVED, APPROVAL_DENIED) for i in ids):
                return answers
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.turn.wake.wait(), settings.PALIMPSEST_POLL_SECONDS)
            self.turn.wake.clear()
            await self.turn.check_stop()

    async def _wait_client_results(self, calls: list[PendingCall]) -> dict[str, ToolOutcome]:
        ids = [c.tool_use_id for c in calls]
        by_id = {c.tool_use_id: c for c in calls}
        deadline = time.monotonic() + settings.PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS
        outcomes: dict[str, ToolOutcome] = {}

        def unanswered(message: str) -> dict[str, ToolOutcome]:
            for tool_use_id in ids:
                if tool_use_id not in outcomes:
                    outcomes[tool_use_id] = self._outcome_error(by_id[tool_use_id], message)
            return outcomes

        while True:
            answered = await db(selectors.tool_calls_answered)(
                session_id=self.turn.session_id, tool_use_ids=ids
            )
            for tool_use_id, row in answered.items():
                content = tool_output_normalize(row.result)
                outcomes[tool_use_id] = ToolOutcome(tool_use_id, row.name, row.result, content, row.is_error)
            if len(outcomes) == len(ids):
                return outcomes
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timeout = settings.PALIMPSEST_CLIENT_TOOL_TIMEOUT_SECONDS
                for tool_use_id in ids:
                    if tool_use_id not in outcomes:
                        call = by_id[tool_use_id]
                        outcomes[tool_use_id] = self._outcome_error(
                            call,
                            f"The client did not return a result for {call.name} within {timeout} seconds.",
                        )
                return outcomes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.turn.wake.wait(), min(remaining, settings.PALIMPSEST_POLL_SECONDS)
                )
            self.turn.wake.clear()
            try:
                await self.turn.check_stop()
            except TurnCancelled:
                return unanswered(CANCELLED_TOOL_RESULT)
