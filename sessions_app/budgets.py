"""Budgets (DESIGN.md, "Operating Palimpsest"): `settings.budget` and what a session's tree has
spent against it.

A session's budget (`max_cost_usd`, `max_input_tokens`, `max_output_tokens`, each null for no
limit) counts what its whole subtree spent: its own model calls and those of its children, at any
depth. Children do not inherit the setting (`budget_not_inherited`), but every call in a tree is
checked against the budget of each of its ancestors that has one (`budget_reached`). Input counts
every input token (uncached, cache writes, cache reads); cost is priced per session by its own
model (`usage.UsageTotals.cost`, the price table's cache prices). A session whose model has no
price (or that the scripted model answers) adds no cost.

The checks read the sessions' running totals (`AgentSession.usage_*`): one query for a session
in a tree, none for a root without a budget.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from sessions_app.models import AgentSession
from sessions_app.usage import TOKENS_PER_PRICE_UNIT, ModelPrice, UsageTotals

BUDGET_SETTING = "budget"
# The largest limits a budget may name: well past any real spend, small enough for any database.
MAX_BUDGET_USD = 1_000_000_000.0
MAX_BUDGET_TOKENS = 10**15
BUDGET_DEFAULTS: dict[str, Any] = {"max_cost_usd": None, "max_input_tokens": None, "max_output_tokens": None}
BUDGET_RULES: dict[str, Any] = {
    "max_cost_usd": ("optional", ("number", 0, MAX_BUDGET_USD)),
    "max_input_tokens": ("optional", ("int", 0, MAX_BUDGET_TOKENS)),
    "max_output_tokens": ("optional", ("int", 0, MAX_BUDGET_TOKENS)),
}
# The stop reason of a turn stopped by a budget (PROTOCOL.md v1.2's `turn.completed`).
BUDGET_REACHED = "budget_reached"

# model -> its price where it is priced here (None: no price, e.g. the scripted model's sessions).
PriceOf = Callable[[str], ModelPrice | None]


@dataclass(frozen=True)
class BudgetLimits:
    max_cost_usd: float | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None

    @property
    def any(self) -> bool:
        return not (
            self.max_cost_usd is None and self.max_input_tokens is None and self.max_output_tokens is None
        )


def budget_limits(settings: Mapping[str, Any] | None) -> BudgetLimits:
    """The limits a session's stored settings name (none where the setting is missing: a session
    created before budgets existed)."""
    given = (settings or {}).get(BUDGET_SETTING) or {}
    return BudgetLimits(
        max_cost_usd=given.get("max_cost_usd"),
        max_input_tokens=given.get("max_input_tokens"),
        max_output_tokens=given.get("max_output_tokens"),
    )


def budget_not_inherited(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A parent's settings as its new child takes them: all but the budget (DESIGN.md: "children
    do not inherit `budget`"; the parent's budget still counts the child's calls)."""
    return {**settings, BUDGET_SETTING: dict(BUDGET_DEFAULTS)}


@dataclass(frozen=True)
class BudgetSpend:
    """What a subtree spent: every input token, the output tokens, the estimated cost in USD
    (None when no session of it is priced)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class _Row:
    id: uuid.UUID
    parent_id: uuid.UUID | None
    model: str
    limits: BudgetLimits
    totals: UsageTotals


_ROW_FIELDS = (
    "id",
    "parent_session_id",
    "model",
    "settings",
    "usage_input_tokens",
    "usage_output_tokens",
    "usage_cache_creation_tokens",
    "usage_cache_read_tokens",
)


def _tree_rows(root_id: uuid.UUID) -> dict[uuid.UUID, _Row]:
    """Every session of the tree rooted at `root_id`, by id (one query)."""
    rows = AgentSession.objects.filter(Q(pk=root_id) | Q(root_session_id=root_id)).values_list(*_ROW_FIELDS)
    return {
        pk: _Row(
            id=pk,
            parent_id=parent,
            model=model,
            limits=budget_limits(settings),
            totals=UsageTotals(
                input_tokens=uncached,
                output_tokens=output,
                cache_creation_tokens=written,
                cache_read_tokens=read,
            ),
        )
        for pk, parent, model, settings, uncached, output, written, read in rows
    }


def _subtree_spend(rows: Mapping[uuid.UUID, _Row], top: uuid.UUID, price_of: PriceOf) -> BudgetSpend:
    children: dict[uuid.UUID, list[uuid.UUID]] = {}
    for row in rows.values():
        if row.parent_id is not None:
            children.setdefault(row.parent_id, []).append(row.id)
    input_tokens = output_tokens = 0
    cost: float | None = None
    stack = [top]
    while stack:
        row = rows[stack.pop()]
        stack.extend(children.get(row.id, ()))
        input_tokens += row.totals.prompt_tokens
        output_tokens += row.totals.output_tokens
        row_cost = row.totals.cost(price_of(row.model))
        if row_cost is not None:
            cost = (cost or 0.0) + row_cost
    return BudgetSpend(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost)


def session_spend(*, session: AgentSession, price_of: PriceOf) -> BudgetSpend:
    """What the session and the sessions below it spent: what its budget counts (one query)."""
    return _subtree_spend(_tree_rows(session.root_id), session.pk, price_of)


def _ancestry(rows: Mapping[uuid.UUID, _Row], session_id: uuid.UUID) -> Iterable[_Row]:
    """The session's row, then its parent's, up to the root's."""
    current: uuid.UUID | None = session_id
    while current is not None and current in rows:
        row = rows[current]
        yield row
        current = row.parent_id


@dataclass(frozen=True)
class BudgetStop:
    """Why a model call may not be made: whose budget (`session_id`), which limit, and a sentence
    for the operator and the turn's record."""

    session_id: uuid.UUID
    limit: str
    message: str


def _limit_passed(
    limits: BudgetLimits, spend: BudgetSpend, *, input_estimate: int, input_price: float | None
) -> tuple[str, str] | None:
    """The first limit that `spend` has reached, or that a call with `input_estimate` input tokens
    (priced at `input_price` USD per million, None: unpriced) would take past it."""
    if limits.max_input_tokens is not None:
        if spend.input_tokens >= limits.max_input_tokens:
            return "max_input_tokens", f"{spend.input_tokens} input tokens spent of {limits.max_input_tokens}"
        if spend.input_tokens + input_estimate > limits.max_input_tokens:
            return "max_input_tokens", (
                f"the next call's about {input_estimate} input tokens would pass {limits.max_input_tokens} "
                f"({spend.input_tokens} spent)"
            )
    if limits.max_output_tokens is not None and spend.output_tokens >= limits.max_output_tokens:
        return "max_output_tokens", f"{spend.output_tokens} output tokens spent of {limits.max_output_tokens}"
    if limits.max_cost_usd is not None:
        spent = spend.cost_usd or 0.0
        if spend.cost_usd is not None and spent >= limits.max_cost_usd:
            return "max_cost_usd", f"${spent:.4f} spent of ${limits.max_cost_usd:.4f}"
        if input_price is not None:
            implied = input_estimate * input_price / TOKENS_PER_PRICE_UNIT
            if spent + implied > limits.max_cost_usd:
                return "max_cost_usd", (
                    f"the next call's input (about ${implied:.4f}) would pass ${limits.max_cost_usd:.4f} "
                    f"(${spent:.4f} spent)"
                )
    return None


def _output_left(
    limits: BudgetLimits, spend: BudgetSpend, *, input_estimate: int, price: ModelPrice | None
) -> list[int]:
    """The output tokens a call may still write under each of `limits` that bounds them: what
    `max_output_tokens` leaves, and what `max_cost_usd` leaves once the call's input is paid
    (priced output only)."""
    left: list[int] = []
    if limits.max_output_tokens is not None:
        left.append(limits.max_output_tokens - spend.output_tokens)
    if limits.max_cost_usd is not None and price is not None and price.output > 0:
        money = (
            limits.max_cost_usd
            - (spend.cost_usd or 0.0)
            - input_estimate * price.input / TOKENS_PER_PRICE_UNIT
        )
        left.append(math.floor(money * TOKENS_PER_PRICE_UNIT / price.output))
    return left


@dataclass(frozen=True)
class BudgetVerdict:
    """What the budgets say of the session's next model call: `stop` when it must not be made;
    else `output_room`, the most output tokens it may write without passing one (None: no
    budget bounds them), which the call's `max_tokens` is lowered to."""

    stop: BudgetStop | None = None
    output_room: int | None = None


def budget_verdict(
    *,
    session_id: uuid.UUID,
    root_id: uuid.UUID,
    model: str,
    input_estimate: int,
    price_of: PriceOf,
) -> BudgetVerdict:
    """Whether the session's next model call, of about `input_estimate` input tokens, may be
    made: not when a budget of the session or of one of its ancestors (each over its own
    subtree) is reached, or would be passed by the call's input (its cost priced at `model`'s
    uncached input price), or leaves no output token; else how many output tokens it may write.
    One query (the tree's rows)."""
    rows = _tree_rows(root_id)
    price = price_of(model)
    room: int | None = None
    for row in _ancestry(rows, session_id):
        if not row.limits.any:
            continue
        spend = _subtree_spend(rows, row.id, price_of)
        passed = _limit_passed(
            row.limits, spend, input_estimate=input_estimate, input_price=price.input if price else None
        )
        if (
            passed is None
            and min(_output_left(row.limits, spend, input_estimate=input_estimate, price=price), default=1)
            < 1
        ):
            passed = "max_cost_usd", "the next call's input leaves nothing for its answer"
        if passed is not None:
            limit, detail = passed
            whose = "this session's budget" if row.id == session_id else f"the budget of session {row.id}"
            message = f"Budget reached: {whose}, {limit}: {detail}. Raise it to go on; nothing was lost."
            return BudgetVerdict(stop=BudgetStop(session_id=row.id, limit=limit, message=message))
        for left in _output_left(row.limits, spend, input_estimate=input_estimate, price=price):
            room = left if room is None else min(room, left)
    return BudgetVerdict(output_room=room)


def budget_reached(
    *,
    session_id: uuid.UUID,
    root_id: uuid.UUID,
    model: str,
    input_estimate: int,
    price_of: PriceOf,
) -> BudgetStop | None:
    """`budget_verdict`'s stop: whether the session's next model call must not be made."""
    return budget_verdict(
        session_id=session_id, root_id=root_id, model=model, input_estimate=input_estimate, price_of=price_of
    ).stop


@dataclass(frozen=True)
class BudgetLine:
    """One limit of a session's budget against what its subtree spent (the dashboard's panel)."""

    limit: str
    label: str
    spent: float
    maximum: float
    unit: str

    @property
    def share(self) -> float:
        """The share of the limit spent, 0 to 1 (a limit of 0 is all spent)."""
        if self.maximum <= 0:
            return 1.0
        return min(self.spent / self.maximum, 1.0)

    @property
    def percent(self) -> int:
        return round(self.share * 100)

    @property
    def reached(self) -> bool:
        return self.spent >= self.maximum


def budget_lines(*, session: AgentSession, price_of: PriceOf) -> list[BudgetLine]:
    """Each limit the session's budget sets, against what its subtree spent (empty without a
    budget: no query)."""
    limits = budget_limits(session.settings)
    if not limits.any:
        return []
    spend = _subtree_spend(_tree_rows(session.root_id), session.pk, price_of)
    lines = []
    if limits.max_cost_usd is not None:
        lines.append(
            BudgetLine("max_cost_usd", "Cost", spend.cost_usd or 0.0, float(limits.max_cost_usd), "USD")
        )
    if limits.max_input_tokens is not None:
        lines.append(
            BudgetLine(
                "max_input_tokens", "Input tokens", spend.input_tokens, limits.max_input_tokens, "tokens"
            )
        )
    if limits.max_output_tokens is not None:
        lines.append(
            BudgetLine(
                "max_output_tokens", "Output tokens", spend.output_tokens, limits.max_output_tokens, "tokens"
            )
        )
    return lines
