"""Keeping every request inside the window without losing the running turn (DESIGN.md,
"Compaction keeps the live work").

Before every model call whose estimate is over the threshold, the tiers are tried in order:
1. mask tool results older than the last `compaction.mask_keep_recent` across the epoch (no
   model call); if that is enough, nothing else happens;
2. otherwise, when there is older history worth a summary and the breaker is not tripped: the
   warning step (seed 000), then a summary of the history *before* the running turn, merged with
   the previous summary; the new epoch starts with the summary followed by the running turn's own
   messages, verbatim; the turn then goes on with the next call, whatever the warning step said;
3. if still over, mask the running turn's older results (its newest stays whole);
4. if still over, summarize the running turn's older steps (issue 31 item 8: a long single turn,
   a child's whole history): the new epoch keeps what precedes the turn, the turn's request and
   its newest `compaction.turn_keep_steps` steps verbatim, with one note summarizing the steps
   between them right after the request (after the warning step, when the turn was not warned);
5. if what is left does not fit the window, the turn ends with `context_window_too_small`.
Each call's `max_tokens` is lowered so that the prompt plus the answer fits the window.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from sessions_app import services
from sessions_app.common.content import content_text, text_clip_middle
from sessions_app.common.db import db, db_heavy
from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.engine.budget_check import budget_guard
from sessions_app.engine.compaction import budget
from sessions_app.engine.compaction.budget import ContextWindowTooSmall
from sessions_app.engine.compaction.masking import Masked, mask_candidates, results_mask
from sessions_app.engine.compaction.summary import (
    SUMMARY_CALL_SHARED,
    SUMMARY_MIN_OUTPUT_TOKENS,
    CompactionFailed,
    shared_instruction,
    summarize,
    summarize_shared,
    summary_input_estimate,
    summary_limit,
)
from sessions_app.engine.context import (
    BuiltRequest,
    PreparedHistory,
    StoredMessage,
    anchors_stale_after,
    build_request,
)
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.feature_set import FeatureSet
from sessions_app.engine.history import history_remember, history_view
from sessions_app.engine.prompts import (
    COMPACTION_SUMMARY_MESSAGE,
    COMPACTION_TURN_INSTRUCTION,
    COMPACTION_TURN_MERGE_INSTRUCTION,
    PRE_COMPACTION_WARNING,
    TURN_SUMMARY_MESSAGE,
)
from sessions_app.engine.providers import Provider
from sessions_app.engine.providers.base import ModelResponse
from sessions_app.message_content import resolved
from sessions_app.models import Message, SessionStatus

T = TypeVar("T")


class CompactingTurn(Protocol):
    """What the compactor needs of the running turn (the runner is one): its ids, its epoch and
    prepared history (which a compaction replaces), how it builds a request, how it awaits
    what a cancel must abandon, and how it records a summary call."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    epoch: int
    history: PreparedHistory
    features: FeatureSet

    def prebuilt_take(self) -> tuple[SessionSnapshot, BuiltRequest] | None: ...

    def build(self) -> tuple[SessionSnapshot, BuiltRequest]: ...

    def build_with(
        self,
        snapshot: SessionSnapshot,
        history: PreparedHistory,
        *,
        max_tokens: int | None = None,
        question: bool = False,
        keep: bool = True,
    ) -> BuiltRequest: ...

    async def cancellable(self, awaitable: Awaitable[T]) -> T: ...

    async def record_summary(
        self, body: dict, response: ModelResponse, purpose: str, duration_ms: int
    ) -> None: ...

    async def record_summary_built(
        self, built: BuiltRequest, response: ModelResponse, duration_ms: int
    ) -> None: ...


TRIGGER_THRESHOLD = "threshold"
TRIGGER_PROMPT_TOO_LONG = "prompt_too_long"
TRIGGER_OPERATOR = "operator"
# When the API says a prompt is too long, the tiers aim at this share of our estimate of it.
FORCED_SHARE = 0.5
# Older history worth a summary call: below this, summarizing cannot make room.
MIN_SUMMARIZABLE_TOKENS = 200
# About the tokens of a masked result's placeholder (`prompts.MASKED_RESULT` with its size and id).
MASK_PLACEHOLDER_TOKENS = 40
# What a compaction summarizes (`Archive.kind`): the history before the running turn, or the
# running turn's own older steps.
KIND_HISTORY = "history"
KIND_TURN = "turn"
# How much of the turn's request the summary call of its steps is shown (the request itself
# stays verbatim in the context).
TURN_REQUEST_SHOWN_CHARS = 1000
_SUMMARY_HEAD = COMPACTION_SUMMARY_MESSAGE.split("{summary}")[0]
_TURN_NOTE_HEAD = TURN_SUMMARY_MESSAGE.split("{summary}")[0]


def _text_after(message: StoredMessage, head: str) -> str | None:
    """The text after `head` of a user message that is one text block starting with it (the
    summary an epoch starts with, a turn's note), else None."""
    if message.role != "user" or len(message.content) != 1:
        return None
    block = message.content[0]
    text = block.get("text", "") if block.get("type") == "text" else ""
    return text[len(head) :] if text.startswith(head) else None


@dataclass
class TurnPlan:
    """What a compaction of the running turn keeps and summarizes: `before`, the positions of
    what precedes the turn and of its request (kept verbatim); `previous`, the turn's earlier
    note (merged into the new one); `steps`, the older steps (summarized: whole steps, every
    tool call with its result); `kept`, the positions of its newest steps (verbatim, from an
    assistant message on)."""

    before: list[int]
    request: StoredMessage
    previous: str | None
    steps: list[StoredMessage]
    kept: list[int]


@dataclass
class Prepared:
    snapshot: SessionSnapshot
    built: BuiltRequest
    estimate: int
    # The request is the warning step (seed 000): the older history is summarized after it.
    warned: bool = False


def _limit(snapshot: SessionSnapshot) -> int:
    """What a call's estimate may be without any tier: the threshold, or less where the window
    with its headroom would not hold the warning step on top of it (`budget.warn_limit`)."""
    return budget.warn_limit(snapshot)


class Compactor:
    def __init__(self, runner: CompactingTurn) -> None:
        self.runner = runner
        # The running turn's first message in the current epoch (its user message, or its
        # carried copy after a compaction), and the warning of this epoch, if given.
        self.turn_start = -1
        self.warning_position: int | None = None
        self.warned = False
        # What the warning given announces: a summary of the history, or of the turn's steps.
        self.warning_kind = KIND_HISTORY
        self.masked: list[Masked] = []
        self.failure = ""  # why the last compaction failed, until one succeeds

    @property
    def history(self) -> PreparedHistory:
        return self.runner.history

    def turn_start_find(self) -> None:
        """Where the running turn begins in the current epoch (runs in a DB thread)."""
        # By the turn alone (a turn is one session's): the (session, epoch, position) index would
        # walk the whole epoch to find the turn's few messages.
        rows = (
            Message.objects.filter(turn_id=self.runner.turn_id, epoch=self.runner.epoch)
            .order_by("position")
            .values_list("position", "metadata")[:2]
        )
        # The epoch's summary belongs to the turn that compacted; the turn itself starts after it.
        first = next((p for p, meta in rows if (meta or {}).get("type") != "compact"), None)
        self.turn_start = first if first is not None else self.history.last_position + 1

    # -- the estimate ------------------------------------------------------
    async def estimate(self) -> tuple[SessionSnapshot, BuiltRequest, int]:
        # The turn's first request was built with its start (`TurnRunner.open`), in the same
        # database call: used once, as long as nothing changed since.
        prebuilt = self.runner.prebuilt_take()
        snapshot, built = prebuilt if prebuilt is not None else await db(self.runner.build)()
        return snapshot, built, budget.estimate_prompt_tokens(snapshot, built.estimated_tokens)

    def lead_summary(self) -> str | None:
        """The summary the epoch starts with (a compaction of the history wrote it; one of the
        turn's own steps copies it), None when it starts with none (epoch 0, or an epoch begun
        by a compaction of a turn that had no summary before it)."""
        stored = self.history.stored
        if self.history.epoch == 0 or not stored:
            return None
        return _text_after(stored[0], _SUMMARY_HEAD)

    def older(self) -> list[StoredMessage]:
        """The epoch's history before the running turn, without the epoch's leading summary."""
        older = [m for m in self.history.stored if m.position < self.turn_start]
        return older[1:] if older and self.lead_summary() is not None else older

    def _summarizable(self, snapshot: SessionSnapshot, *, force: bool = False) -> bool:
        """Older history worth a summary call (any, when the API refused the prompt), and the
        breaker not tripped."""
        tokens = sum(m.token_estimate for m in self.older())
        least = 1 if force else MIN_SUMMARIZABLE_TOKENS
        return tokens >= least and snapshot.compaction_failures < services.COMPACTION_BREAKER_FAILURES

    async def _mask(self, snapshot: SessionSnapshot, ids: list[str], *, excess: int | None) -> list[Masked]:
        if not ids:
            return []
        ratio = snapshot.token_ratio or 1.0
        enough = None if excess is None else math.ceil(excess / ratio)
        # Where the requests before this batch had their breakpoint (`context._mask_anchors`).
        anchor = self.history.first_unmasked_result(snapshot.setting("compaction", "mask_keep_recent"))
        masked = await db_heavy(results_mask)(
            features=self.runner.features,
            session=snapshot,
            turn_id=self.runner.turn_id,
            history=self.history,
            tool_use_ids=ids,
            enough=enough,
        )
        self.masked += masked
        if masked:
            self.history.mask_anchor = anchor
            # The prefix is rewritten from the first result masked: the sections' stale
            # anchored changes after it go too, at no further cost.
            first = self.history.stored[self.history.result_at[masked[0].tool_use_id]].position
            stale, _ = anchors_stale_after(snapshot, first)
            if stale:
                await db(services.session_context_anchors_remove)(
                    session_id=self.runner.session_id,
                    epoch=snapshot.epoch,
                    anchors=[a.stored() for a in stale],
                )
        return masked

    def _masking_pays(self, snapshot: SessionSnapshot, ids: list[str], estimate: int, low_water: int) -> bool:
        """Whether tier 1 should mask: always when there is nothing to summarize instead, else
        only when masking every candidate would bring the request down to the low-water mark.
        A batch that cannot would leave the request just under the threshold, to be masked again
        at the next step by a result or two, each time rewriting the cached prefix from the
        first result masked: then a summary, which starts a new epoch, costs less."""
        if not ids or not self._summarizable(snapshot):
            return True
        ratio = snapshot.token_ratio or 1.0
        saving = self.history.mask_saving_estimate(ids, MASK_PLACEHOLDER_TOKENS)
        first = self.history.stored[self.history.result_at[ids[0]]].position
        saving += anchors_stale_after(snapshot, first)[1]
        return estimate - round(ratio * saving) <= low_water

    async def _mask_announced(
        self, snapshot: SessionSnapshot, ids: list[str], *, excess: int | None, before: int
    ) -> tuple[SessionSnapshot, BuiltRequest, int]:
        masked = await self._mask(snapshot, ids, excess=excess)
        snapshot, built, estimate = await self.estimate()
        if masked:
            await db(services.compaction_masked_announce)(
                session_id=self.runner.session_id,
                masked=[m.as_dict() for m in masked],
                tokens_before=before,
                tokens_after=estimate,
            )
        return snapshot, built, estimate

    # -- before each call --------------------------------------------------
    async def prepare(self, provider: Provider, *, force: bool = False) -> Prepared:
        """The request of the next call, with the tiers applied; `force` (the API said the prompt
        was too long) applies them whatever the estimate says. When it returns `warned`, the
        request holds the warning: the caller compacts after that step."""
        snapshot, built, estimate = await self.estimate()
        # The tiers run over the threshold, and also under it when the call would not fit the
        # window with the headroom its estimate needs (a large step right after a compaction).
        threshold = _limit(snapshot)
        if force:
            threshold = min(threshold, int(estimate * FORCED_SHARE))
        if estimate <= threshold:
            return await self._fit(Prepared(snapshot, built, estimate))
        before = estimate
        trigger = TRIGGER_PROMPT_TOO_LONG if force else TRIGGER_THRESHOLD
        # Tier 1: old results, the cheap way (no model call), in a batch down to the low-water
        # mark: each masking rewrites the cached prefix from its first result on.
        ids = mask_candidates(self.history, keep_recent=snapshot.setting("compaction", "mask_keep_recent"))
        low_water = int(threshold * float(snapshot.setting("compaction", "mask_low_water")))
        if not force and not self._masking_pays(snapshot, ids, estimate, low_water):
            ids = []  # a batch would not reach the low-water mark: the summary comes sooner
        snapshot, built, estimate = await self._mask_announced(
            snapshot, ids, excess=estimate - min(threshold, low_water), before=estimate
        )
        if estimate <= threshold:
            return await self._fit(Prepared(snapshot, built, estimate))
        # Tier 2: a summary of the older history, after the warning step (seed 000). Not after a
        # refusal for length: the provider said this very request is too long, so the warning
        # step (this request and more) would be refused too.
        failed = False
        if self._summarizable(snapshot, force=force):
            if not force and not self.warned:
                room = await self._warning_room(snapshot, estimate)
                if room is None:  # masking for the warning was enough: no summary needed
                    snapshot, built, estimate = await self.estimate()
                    return await self._fit(Prepared(snapshot, built, estimate))
                snapshot, estimate = room
                if self._warning_fits(snapshot, estimate):
                    return await self._warn(snapshot, estimate)
            if await self.compact(provider, snapshot, tokens_before=before, trigger=trigger):
                snapshot, built, estimate = await self.estimate()
                threshold = _limit(snapshot)
                if estimate <= threshold:
                    return await self._fit(Prepared(snapshot, built, estimate))
            else:
                failed = True
        # Tier 3: the running turn's older results (its newest stays whole).
        snapshot, built, estimate = await self._mask_running(snapshot, estimate, target=threshold)
        # Tier 4: the running turn's older steps, summarized into a note inside the turn (a long
        # single turn: a child's whole history is its one turn). Once per turn the warning
        # step comes first, as before a summary of the history.
        if estimate > threshold and not failed and self._turn_plan(snapshot, force=force) is not None:
            if not force and not self.warned:
                room = await self._warning_room(snapshot, estimate)
                if room is None:
                    snapshot, built, estimate = await self.estimate()
                    return await self._fit(Prepared(snapshot, built, estimate))
                snapshot, estimate = room
                if self._warning_fits(snapshot, estimate):
                    return await self._warn(snapshot, estimate, kind=KIND_TURN)
            if await self.compact_turn(provider, snapshot, tokens_before=before, trigger=trigger):
                snapshot, built, estimate = await self.estimate()
                snapshot, built, estimate = await self._mask_running(
                    snapshot, estimate, target=_limit(snapshot)
                )
        return await self._fit(Prepared(snapshot, built, estimate))

    def _turn_plan(
        self, snapshot: SessionSnapshot, *, force: bool = False, end: int | None = None
    ) -> TurnPlan | None:
        """The running turn's compaction (`TurnPlan`), None when it has no steps worth a summary
        call (more than its newest `compaction.turn_keep_steps`, of MIN_SUMMARIZABLE_TOKENS at
        least; any, when the API refused the prompt) or the breaker is tripped. `end`: the
        turn's messages from there on are left out (the warning and the warning step)."""
        if snapshot.compaction_failures >= services.COMPACTION_BREAKER_FAILURES:
            return None
        stored = self.history.stored
        end = self.history.last_position + 1 if end is None else end
        turn = [m for m in stored if self.turn_start <= m.position < end]
        if len(turn) < 2 or turn[0].role != "user":
            return None
        request, rest = turn[0], turn[1:]
        previous = _text_after(rest[0], _TURN_NOTE_HEAD)
        if previous is not None:
            rest = rest[1:]
        # A step begins with the model's answer; its tool results follow it before the next
        # one, so a cut before an answer never parts a call from its result.
        starts = [index for index, message in enumerate(rest) if message.role == "assistant"]
        keep = int(snapshot.setting("compaction", "turn_keep_steps"))
        if len(starts) <= keep:
            return None
        cut = starts[-keep]
        steps = rest[:cut]
        least = 1 if force else MIN_SUMMARIZABLE_TOKENS
        if sum(m.token_estimate for m in steps) < least:
            return None
        return TurnPlan(
            before=[m.position for m in stored if m.position < self.turn_start] + [request.position],
            request=request,
            previous=previous,
            steps=steps,
            kept=[m.position for m in rest[cut:]],
        )

    @staticmethod
    def _warning_fits(snapshot: SessionSnapshot, estimate: int) -> bool:
        return estimate + budget.warning_reserve(snapshot) <= budget.fit_limit(snapshot)

    async def _warning_room(
        self, snapshot: SessionSnapshot, estimate: int
    ) -> tuple[SessionSnapshot, int] | None:
        """Make room for the warning step where the request with it would not fit the window:
        mask the results of the history before the running turn (it is summarized next), then
        the running turn's older ones (its newest stays whole). The snapshot and estimate after;
        None when that alone brought the request under the threshold (no summary is needed)."""
        if self._warning_fits(snapshot, estimate):
            return snapshot, estimate
        target = budget.fit_limit(snapshot) - budget.warning_reserve(snapshot)
        older = [
            tool_use_id
            for tool_use_id, position in self.history.tool_results()
            if position < self.turn_start and tool_use_id not in self.history.masks
        ]
        snapshot, _, estimate = await self._mask_announced(
            snapshot, older, excess=estimate - target, before=estimate
        )
        if not self._warning_fits(snapshot, estimate):
            snapshot, _, estimate = await self._mask_running(snapshot, estimate, target=target)
        return None if estimate <= _limit(snapshot) else (snapshot, estimate)

    async def warning_step(self, snapshot: SessionSnapshot, estimate: int) -> Prepared | None:
        """The warning step before an operator's compaction (no turn runs: the whole epoch is
        older history): the warning stored and its request, after making room for it; None when
        even then it cannot fit (the summary comes at once)."""
        room = await self._warning_room(snapshot, estimate)
        if room is None:
            snapshot, _, estimate = await self.estimate()
        else:
            snapshot, estimate = room
        if not self._warning_fits(snapshot, estimate):
            return None
        return await self._warn(snapshot, estimate)

    async def _warn(self, snapshot: SessionSnapshot, estimate: int, *, kind: str = KIND_HISTORY) -> Prepared:
        """Store seed 000's warning; the request of the warning step (before a compaction of
        `kind`: `compact_warned` makes it)."""
        runner = self.runner
        # Not stored when the budget would not allow the warning step's call (`BudgetReached`):
        # the next turn would give it again.
        await budget_guard(snapshot, input_estimate=estimate)
        warning = await db(services.compaction_warning_store)(
            session_id=runner.session_id,
            turn_id=runner.turn_id,
            epoch=runner.epoch,
            estimated_tokens=estimate,
            threshold_tokens=budget.threshold_tokens(snapshot),
            texts=[PRE_COMPACTION_WARNING, *await db(runner.features.warning_notes)(snapshot)],
        )
        self.history.append(
            StoredMessage(warning.position, "user", resolved(warning), warning.token_estimate)
        )
        self.warned = True
        self.warning_kind = kind
        self.warning_position = warning.position
        if kind == KIND_HISTORY:
            self.history.summary_anchor = self.turn_start
        snapshot, built, warned_estimate = await self.estimate()
        prepared = await self._fit(Prepared(snapshot, built, warned_estimate))
        prepared.warned = True
        prepared.estimate = estimate
        return prepared

    async def _mask_running(
        self, snapshot: SessionSnapshot, estimate: int, *, target: int
    ) -> tuple[SessionSnapshot, BuiltRequest, int]:
        ids = mask_candidates(self.history, keep_recent=1, from_position=self.turn_start)
        if estimate <= target or not ids:
            snapshot, built, estimate = await self.estimate()
            return snapshot, built, estimate
        return await self._mask_announced(snapshot, ids, excess=estimate - target, before=estimate)

    async def _fit(self, prepared: Prepared) -> Prepared:
        """The call's max_tokens lowered to what the window leaves; `ContextWindowTooSmall` when
        that is less than MIN_OUTPUT_TOKENS."""
        snapshot = prepared.snapshot
        room = budget.output_room(snapshot, prepared.estimate)
        if room < budget.MIN_OUTPUT_TOKENS and self.failure:
            raise ContextWindowTooSmall(
                f"Compaction failed ({self.failure}) and masking tool results did not make room: the "
                f"request needs about {prepared.estimate} tokens of a {snapshot.context_window}-token "
                "window. The session is as it was; send the message again to retry.",
                code="compaction_failed",
            )
        if room < budget.MIN_OUTPUT_TOKENS:
            raise ContextWindowTooSmall(
                window_too_small_text(
                    snapshot,
                    prepared.built,
                    estimate=prepared.estimate,
                    what="This request",
                    rest="the history left after masking and summarizing (the running turn: its "
                    "messages and newest tool results)",
                )
            )
        if room < prepared.built.body["max_tokens"]:
            prepared.built = await db(self.runner.build_with)(snapshot, self.history, max_tokens=room)
        return prepared

    # -- the summary -------------------------------------------------------
    async def compact(
        self, provider: Provider, snapshot: SessionSnapshot, *, tokens_before: int, trigger: str
    ) -> bool:
        """Summarize the history before the running turn and start the new epoch with the summary
        and the running turn's messages (before the warning step). False when the summary kept
        failing: then nothing changed but the failure count (`compaction.failed`)."""
        runner = self.runner
        # The summary the epoch starts with: what the last compaction of the history wrote.
        previous = self.lead_summary()
        end = self.warning_position if self.warning_position is not None else self.history.last_position + 1
        carry = [m.position for m in self.history.stored if self.turn_start <= m.position < end]
        # What the next epoch's request leaves for the summary, so that it still fits the window
        # (with the headroom of a request the provider has not counted yet).
        fits = budget.fit_limit(replace(snapshot, last_prompt_tokens=None))
        after = await db(self._estimate_after)(snapshot, self._history_after("", carry))
        room = int((fits - after) * (1 - budget.ESTIMATE_ERROR_SHARE))
        shared = None
        if snapshot.setting("compaction", "summary_call") == SUMMARY_CALL_SHARED:
            shared = await db(self._shared_request)(snapshot, merge=previous is not None, room=room)
        # The summary is a model call too: not made past a budget (`BudgetReached`).
        await budget_guard(
            snapshot,
            input_estimate=budget.estimate_prompt_tokens(snapshot, shared.estimated_tokens)
            if shared is not None
            else summary_input_estimate(snapshot, self.older(), previous),
        )
        await db(services.session_status_set)(session_id=runner.session_id, status=SessionStatus.COMPACTING)
        started = time.monotonic()
        try:
            summary = None
            if shared is not None:
                summary = await runner.cancellable(
                    summarize_shared(provider=provider, built=shared, record=runner.record_summary_built)
                )
            if summary is None:
                summary = await runner.cancellable(
                    summarize(
                        provider=provider,
                        session=snapshot,
                        previous_summary=previous,
                        history=self.older(),
                        record=runner.record_summary,
                        room=room,
                    )
                )
        except CompactionFailed as exc:
            self.history.summary_anchor = None
            await self._failure_record(exc, trigger=trigger, kind=KIND_HISTORY)
            return False
        tokens_after = await db(self._estimate_after)(snapshot, self._history_after(summary, carry))
        archive_row, messages = await db(services.compaction_store)(
            session_id=runner.session_id,
            turn_id=runner.turn_id,
            epoch=runner.epoch,
            summary=summary,
            summary_message=COMPACTION_SUMMARY_MESSAGE.format(summary=summary),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            carry_positions=carry,
            trigger=trigger,
            duration_ms=int((time.monotonic() - started) * 1000),
            masked=[m.as_dict() for m in self.masked],
        )
        await self._epoch_begin(messages, turn_start=messages[1].position if len(messages) > 1 else None)
        return True

    def _shared_request(self, snapshot: SessionSnapshot, *, merge: bool, room: int) -> BuiltRequest | None:
        """The summary call in the session's layout (`compaction.summary_call: "shared"`): the
        tools, system prompt and history before the running turn exactly as the session's
        requests send them (read from the prompt cache: the warning step put a breakpoint where
        this history ends), then one user message asking for the summary. None when it would not
        fit the window with the summary's room (the separate call, which can split the history,
        is made instead). Runs in a DB thread."""
        before = [m for m in self.history.stored if m.position < self.turn_start]
        if not before:
            return None
        limit = summary_limit(snapshot, room)
        text = shared_instruction(limit, merge=merge)
        # Not a stored message (position -1): the record carries it whole.
        ask = StoredMessage(-1, "user", [{"type": "text", "text": text}], budget.message_estimate(text))
        prepared = PreparedHistory(
            [*before, ask], epoch=self.history.epoch, masks=self.history.masks, view=self.history.view
        )
        built = self.runner.build_with(snapshot, prepared, max_tokens=limit, question=True)
        estimate = budget.estimate_prompt_tokens(snapshot, built.estimated_tokens)
        output = min(limit, budget.output_room(snapshot, estimate))
        if output < min(limit, SUMMARY_MIN_OUTPUT_TOKENS):
            return None
        if output < limit:
            built = self.runner.build_with(snapshot, prepared, max_tokens=output, question=True)
        return built

    async def compact_warned(
        self, provider: Provider, snapshot: SessionSnapshot, *, tokens_before: int, trigger: str
    ) -> bool:
        """The compaction the warning step announced: of the history before the running turn,
        or of the turn's older steps (the warning and the warning step are left out of both)."""
        if self.warning_kind == KIND_TURN:
            return await self.compact_turn(
                provider, snapshot, tokens_before=tokens_before, trigger=trigger, end=self.warning_position
            )
        return await self.compact(provider, snapshot, tokens_before=tokens_before, trigger=trigger)

    async def compact_turn(
        self,
        provider: Provider,
        snapshot: SessionSnapshot,
        *,
        tokens_before: int,
        trigger: str,
        end: int | None = None,
    ) -> bool:
        """Summarize the running turn's older steps (`_turn_plan`) into one note and start the new
        epoch with what precedes the turn, the turn's request, the note and its newest steps,
        verbatim but for the note; the epoch is archived like any (`session_archive_read` reads
        the summarized steps). False when there is nothing to summarize, or the summary kept
        failing (then nothing changed but the failure count)."""
        runner = self.runner
        plan = self._turn_plan(snapshot, force=True, end=end)
        if plan is None:
            return False
        await budget_guard(
            snapshot, input_estimate=summary_input_estimate(snapshot, plan.steps, plan.previous)
        )
        await db(services.session_status_set)(session_id=runner.session_id, status=SessionStatus.COMPACTING)
        started = time.monotonic()
        fits = budget.fit_limit(replace(snapshot, last_prompt_tokens=None))
        after = await db(self._estimate_after)(snapshot, self._turn_after(plan, ""))
        room = int((fits - after) * (1 - budget.ESTIMATE_ERROR_SHARE))
        request = text_clip_middle(
            content_text(plan.request.content, sep="\n"),
            head=TURN_REQUEST_SHOWN_CHARS // 2,
            tail=TURN_REQUEST_SHOWN_CHARS // 2,
        )
        try:
            summary = await runner.cancellable(
                summarize(
                    provider=provider,
                    session=snapshot,
                    previous_summary=plan.previous,
                    history=plan.steps,
                    record=runner.record_summary,
                    room=room,
                    instructions=(
                        COMPACTION_TURN_INSTRUCTION.format(request=request),
                        COMPACTION_TURN_MERGE_INSTRUCTION.format(request=request),
                    ),
                )
            )
        except CompactionFailed as exc:
            await self._failure_record(exc, trigger=trigger, kind=KIND_TURN)
            return False
        note = TURN_SUMMARY_MESSAGE.format(summary=summary)
        tokens_after = await db(self._estimate_after)(snapshot, self._turn_after(plan, note))
        _, messages = await db(services.compaction_turn_store)(
            session_id=runner.session_id,
            turn_id=runner.turn_id,
            epoch=runner.epoch,
            summary=summary,
            note=note,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            carry_before=plan.before,
            carry_after=plan.kept,
            trigger=trigger,
            duration_ms=int((time.monotonic() - started) * 1000),
            masked=[m.as_dict() for m in self.masked],
        )
        await self._epoch_begin(messages, turn_start=messages[len(plan.before) - 1].position)
        return True

    async def _failure_record(self, exc: CompactionFailed, *, trigger: str, kind: str) -> None:
        self.failure = str(exc)
        runner = self.runner
        await db(services.compaction_failure_record)(
            session_id=runner.session_id, message=str(exc), trigger=trigger, kind=kind
        )
        await db(services.session_status_set)(session_id=runner.session_id, status=SessionStatus.RUNNING)

    async def _epoch_begin(self, messages: list[Message], *, turn_start: int | None) -> None:
        """The running turn goes on in the epoch a compaction began (`messages`, stored); its
        first message there is at `turn_start` (None: no turn runs)."""
        runner = self.runner
        runner.epoch += 1
        masks = {tool_use_id: self.history.masks[tool_use_id] for tool_use_id in self.history.masks}
        stored = [StoredMessage(m.position, m.role, resolved(m), m.token_estimate) for m in messages]
        view = await db(history_view)(runner.features, runner.session_id, runner.epoch, stored)
        runner.history = PreparedHistory(stored, epoch=runner.epoch, masks=masks, view=view)
        history_remember(runner.session_id, runner.history)
        self.turn_start = turn_start if turn_start is not None else runner.history.last_position + 1
        self.warning_position = None
        self.masked = []
        self.failure = ""

    def _history_after(self, summary: str, carry: list[int]) -> list[StoredMessage]:
        """The history once it is the summary and the running turn."""
        text = COMPACTION_SUMMARY_MESSAGE.format(summary=summary)
        kept = set(carry)
        return [
            StoredMessage(-1, "user", [{"type": "text", "text": text}], estimate_text_tokens(text)),
            *(m for m in self.history.stored if m.position in kept),
        ]

    def _turn_after(self, plan: TurnPlan, note: str) -> list[StoredMessage]:
        """The history once the turn's older steps are its note."""
        before, kept = set(plan.before), set(plan.kept)
        return [
            *(m for m in self.history.stored if m.position in before),
            StoredMessage(-1, "user", [{"type": "text", "text": note}], estimate_text_tokens(note)),
            *(m for m in self.history.stored if m.position in kept),
        ]

    def _estimate_after(self, snapshot: SessionSnapshot, messages: list[StoredMessage]) -> int:
        """The calibrated size of the next request once the history is `messages` (runs in a DB
        thread)."""
        history = PreparedHistory(messages, masks=self.history.masks)
        # A history that is not the session's: nothing it would pin or anchor is kept.
        after = self.runner.build_with(snapshot, history, keep=False)
        return round((snapshot.token_ratio or 1.0) * after.estimated_tokens)


def message_admit(snapshot: SessionSnapshot, estimate: int, *, feature_set: FeatureSet) -> None:
    """Refuse (`ContextWindowTooSmall`) a user message of `estimate` tokens that cannot fit the
    session's window even with an empty history: the system prompt, the tools and the memory
    plus the message itself leave no room for an answer. Cheap for a usual message; a large one
    (a third of the window) is checked against the request's fixed parts, which reads the
    features' sections (runs in a database thread)."""
    room = snapshot.context_window - budget.MIN_OUTPUT_TOKENS
    ratio = snapshot.token_ratio or 1.0
    tokens = round(ratio * estimate)
    fixed: BuiltRequest | None = None
    if tokens > room // 3:
        fixed = _fixed_request(snapshot, feature_set)
        tokens += round(ratio * fixed.estimated_tokens)
    # The same measure the turn's calls are held to (`Compactor._fit`): refused here, or never.
    if budget.output_room(snapshot, tokens) >= budget.MIN_OUTPUT_TOKENS:
        return
    if fixed is None:
        fixed = _fixed_request(snapshot, feature_set)
        tokens += round(ratio * fixed.estimated_tokens)
        if budget.output_room(snapshot, tokens) >= budget.MIN_OUTPUT_TOKENS:
            return
    raise ContextWindowTooSmall(
        window_too_small_text(
            snapshot,
            fixed,
            estimate=tokens,
            what="This message",
            rest="the message itself",
            rest_tokens=round(ratio * estimate),
        )
    )


def _fixed_request(snapshot: SessionSnapshot, feature_set: FeatureSet) -> BuiltRequest:
    """The session's request with no history: what every call carries (system prompt, tools,
    the features' sections)."""
    return build_request(
        session=snapshot,
        history=PreparedHistory(),
        server_tools=feature_set.tools_for_session(snapshot),
        max_tokens=budget.MIN_OUTPUT_TOKENS,
        sections=feature_set.sections,
    )


def window_too_small_text(
    snapshot: SessionSnapshot,
    built: BuiltRequest,
    *,
    estimate: int,
    what: str,
    rest: str,
    rest_tokens: int | None = None,
) -> str:
    """Why a request cannot fit the window, part by part, and what to change (issue 30 item 9: a
    bare "needs about 3309 tokens and the window is 4000" read as a contradiction, because the
    room kept for the answer was not said). `estimate` is the whole prompt's calibrated estimate;
    `rest` names what it holds beyond the fixed parts (`built`'s system prompt, tools and
    sections), `rest_tokens` its size (by default: the estimate less the fixed parts)."""
    ratio = snapshot.token_ratio or 1.0
    parts = built.breakdown
    tools = round(ratio * parts.get("tools", 0))
    system = round(ratio * parts.get("system", 0))
    memory = round(ratio * (parts.get("dynamic_system", 0) + parts.get("transient", 0)))
    if rest_tokens is None:
        rest_tokens = max(0, estimate - tools - system - memory)
    headroom = budget.window_headroom(snapshot, estimate)
    window = snapshot.context_window
    return (
        f"{what} needs about {estimate:,} tokens and the context window is {window:,}, which must also "
        f"keep {budget.MIN_OUTPUT_TOKENS:,} tokens for the answer and {headroom:,} as a margin for the "
        f"token estimate's error. The prompt: the tools {tools:,}, the system prompt with the features' "
        f"guidance {system:,}, memory (notepad, scratchpad and the other sections) {memory:,}, "
        f"{rest} {rest_tokens:,}. It cannot fit, whatever is summarized: use a larger context window "
        f"(at least about {budget.window_needed(snapshot, estimate):,}), offer fewer tools (switch "
        "features off in the session's settings), or send a shorter message or system prompt."
    )
