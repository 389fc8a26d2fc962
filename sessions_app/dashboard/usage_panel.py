"""What the session page's usage panel shows (`dashboard/usage.html#panel`): the session's usage
and estimated cost, and its budget's limits against what its tree spent. One source for the page
and for the live fragments."""

from __future__ import annotations

from typing import Any

from sessions_app.budgets import budget_lines
from sessions_app.engine.budget_check import price_here
from sessions_app.engine.providers import provider_name_for_model
from sessions_app.models import AgentSession
from sessions_app.usage import session_usage


def usage_panel_context(session: AgentSession) -> dict[str, Any]:
    """`usage` (`usage.SessionUsage`) and `budget_lines` (`budgets.BudgetLine`s, empty without a
    budget)."""
    return {
        "usage": session_usage(session, provider=provider_name_for_model(session.model)),
        "budget_lines": budget_lines(session=session, price_of=price_here),
    }
