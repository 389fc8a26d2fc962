"""Filters of the usage panel and the session list's usage columns."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

# Costs under a dollar show four decimals (a short session costs fractions of a cent).
SMALL_COST_USD = 1.0


@register.filter
def usd(value: Any) -> str:
    """An estimated cost: `$12.34`, `$0.0042`; `–` when there is none (a model without a price)."""
    if value is None:
        return "–"
    amount = float(value)
    if amount == 0:
        return "$0.00"
    if amount < SMALL_COST_USD:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"


@register.filter
def share(value: Any) -> str:
    """A share (0–1) as a percentage with one decimal; `–` when there is none."""
    if value is None:
        return "–"
    return f"{float(value) * 100:.1f}%"


@register.filter
def thousands(value: Any) -> str:
    """A count with thousands separators (`9,480`); `–` when there is none."""
    if value is None or value == "":
        return "–"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "–"
