"""Usage and billed cost per turn: the usage panel's table of a session's turns, newest first,
a page at a time.

A page is three queries whatever the session's length: its turns (one more than shown, to know
whether older ones exist), the number of turns before them (each turn's ordinal), and one
aggregate of the page's model calls grouped by turn. The calls made outside any turn (an
operator's compaction) are one more aggregate row on the first page.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from sessions_app.dashboard.selectors.common import NotFound, uuid_or_not_found
from sessions_app.models import AgentSession, ModelCall, Turn
from sessions_app.usage import ModelPrice, UsageTotals

TURN_USAGE_PAGE_SIZE = 20

_SUMS = {
    "calls": Count("pk"),
    "input": Sum("input_tokens"),
    "output": Sum("output_tokens"),
    "written": Sum("cache_creation_input_tokens"),
    "read": Sum("cache_read_input_tokens"),
}


@dataclass(frozen=True)
class TurnUsage:
    """One row of the table: a turn (None for the calls made outside any turn) and its calls'
    usage, billed at the session's model's prices (None without a price)."""

    turn_id: uuid.UUID | None
    ordinal: int | None  # 1 for the session's first turn
    started_at: datetime | None
    steps: int
    totals: UsageTotals
    cost: float | None


@dataclass(frozen=True)
class TurnUsagePage:
    rows: list[TurnUsage]
    # The turn the next (older) page continues before; None when this page reaches the first.
    older_than: uuid.UUID | None
    first_page: bool
    turns: int  # the session's turns in all


def _totals(row: Mapping[str, Any] | None) -> UsageTotals:
    if row is None:
        return UsageTotals()
    return UsageTotals(
        model_calls=row["calls"] or 0,
        input_tokens=row["input"] or 0,
        output_tokens=row["output"] or 0,
        cache_creation_tokens=row["written"] or 0,
        cache_read_tokens=row["read"] or 0,
    )


def _older_than(turns: QuerySet[Turn], session_id: uuid.UUID, before: Any) -> QuerySet[Turn]:
    """`turns` older than the session's turn `before` (the page's cursor): NotFound for a bad or
    foreign id."""
    cursor = (
        Turn.objects.filter(session_id=session_id, pk=uuid_or_not_found(before))
        .values_list("started_at", "pk")
        .first()
    )
    if cursor is None:
        raise NotFound
    started_at, pk = cursor
    return turns.filter(Q(started_at__lt=started_at) | Q(started_at=started_at, pk__lt=pk))


def turn_usage_page(*, session: AgentSession, price: ModelPrice | None, before: Any = None) -> TurnUsagePage:
    """A page of `session`'s turns, newest first, each with its model calls' usage and cost at
    `price` (`usage.session_usage(...).price`: None for an unpriced model or the scripted
    provider); older than the turn `before` (a turn id) when given. The first page ends with the
    calls made outside any turn, when there are some."""
    all_turns = Turn.objects.filter(session_id=session.pk)
    turns = all_turns if before in (None, "") else _older_than(all_turns, session.pk, before)
    shown = list(
        turns.order_by("-started_at", "-pk").values("pk", "started_at", "steps")[: TURN_USAGE_PAGE_SIZE + 1]
    )
    has_older = len(shown) > TURN_USAGE_PAGE_SIZE
    shown = shown[:TURN_USAGE_PAGE_SIZE]
    total = all_turns.count()
    # Each turn's ordinal: the page's oldest is the first turn unless older ones exist.
    oldest_ordinal = 1
    if has_older:
        last = shown[-1]
        older = Q(started_at__lt=last["started_at"]) | Q(started_at=last["started_at"], pk__lt=last["pk"])
        oldest_ordinal = all_turns.filter(older).count() + 1
    sums = {
        row["turn_id"]: row
        for row in ModelCall.objects.filter(session_id=session.pk, turn_id__in=[t["pk"] for t in shown])
        .order_by()
        .values("turn_id")
        .annotate(**_SUMS)
    }
    rows = []
    for offset, turn in enumerate(shown):
        totals = _totals(sums.get(turn["pk"]))
        rows.append(
            TurnUsage(
                turn_id=turn["pk"],
                ordinal=oldest_ordinal + len(shown) - 1 - offset,
                started_at=turn["started_at"],
                steps=turn["steps"],
                totals=totals,
                cost=totals.cost(price),
            )
        )
    first_page = before in (None, "")
    if first_page:
        outside = ModelCall.objects.filter(session_id=session.pk, turn__isnull=True).aggregate(**_SUMS)
        if outside["calls"]:
            totals = _totals(outside)
            rows.append(TurnUsage(None, None, None, 0, totals, totals.cost(price)))
    return TurnUsagePage(
        rows=rows,
        older_than=shown[-1]["pk"] if has_older else None,
        first_page=first_page,
        turns=total,
    )
