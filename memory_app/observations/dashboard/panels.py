"""The observations' tab of the session page: the session's offloaded results, and a reader of
each (head, tail, range, lines or grep, as the model reads them); the list is brought up to date
live when a result is offloaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.template.loader import render_to_string

from memory_app.observations.dashboard.selectors import observations_of
from sessions_app.engine.contract import DashboardPanel
from sessions_app.models import AgentSession

TEMPLATE = "observations/dashboard.html"
TOOL_RESULT = "tool.result"


def panel_context(session: AgentSession) -> dict[str, Any]:
    return {"observations": observations_of(session_id=session.pk)}


def panel_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """The list again after a tool result was offloaded."""
    if not any(event["type"] == TOOL_RESULT and event.get("observation_id") for event in events):
        return []
    context = {"session": session, "oob": True, **panel_context(session)}
    return [render_to_string(f"{TEMPLATE}#list", context)]


PANEL = DashboardPanel(
    name="observations",
    title="Observations",
    template=f"{TEMPLATE}#panel",
    context=panel_context,
    live=panel_live,
)
