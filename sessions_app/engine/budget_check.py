"""Budgets in the engine (DESIGN.md, "Operating Palimpsest"): checked before each model call, a
turn's steps, its warning step and compaction's summary calls alike, against the budget of the
session and of each of its ancestors (`sessions_app.budgets`). A call that may not be made raises
`BudgetReached` instead; the turn then ends with `turn.completed` `stop_reason: "budget_reached"`,
everything it did so far stored, as a cancelled turn's is (its user message may be left without a
reply: the next message follows it, and the request merges the two)."""

from __future__ import annotations

import logging

from sessions_app.budgets import BudgetStop, budget_limits, budget_verdict
from sessions_app.common import metrics
from sessions_app.common.db import db
from sessions_app.common.model_names import PROVIDER_SCRIPTED
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.providers import provider_name_for_model
from sessions_app.usage import ModelPrice, model_price

logger = logging.getLogger("palimpsest.engine")


class BudgetReached(Exception):
    """A model call was not made: a budget is reached (`stop` says whose and which limit)."""

    def __init__(self, stop: BudgetStop) -> None:
        super().__init__(stop.message)
        self.stop = stop


def price_here(model: str) -> ModelPrice | None:
    """`model`'s price on this server: none where the scripted model answers it (as the
    dashboard's cost, `usage.session_usage`)."""
    if provider_name_for_model(model) == PROVIDER_SCRIPTED:
        return None
    return model_price(model)


def budget_check_needed(snapshot: SessionSnapshot) -> bool:
    """Whether a call of this session can meet a budget at all: a root without one cannot (the
    check then costs nothing); a child may meet an ancestor's."""
    return snapshot.depth > 0 or budget_limits(snapshot.settings).any


async def budget_guard(snapshot: SessionSnapshot, *, input_estimate: int) -> int | None:
    """Raise `BudgetReached` when the session's next model call, of about `input_estimate` input
    tokens, must not be made (`budgets.budget_verdict`); else return the most output tokens it
    may write inside every budget (None: no budget bounds them), for its `max_tokens`."""
    if not budget_check_needed(snapshot):
        return None
    verdict = await db(budget_verdict)(
        session_id=snapshot.id,
        root_id=snapshot.root_id or snapshot.id,
        model=snapshot.model,
        input_estimate=input_estimate,
        price_of=price_here,
    )
    if verdict.stop is not None:
        logger.info("session %s: %s", snapshot.id, verdict.stop.message)
        metrics.budget_stopped(limit=verdict.stop.limit)
        raise BudgetReached(verdict.stop)
    return verdict.output_room
