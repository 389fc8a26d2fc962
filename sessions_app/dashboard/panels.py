"""The parts of the session page that features fill (`DashboardPanel`s, `features().panels`),
rendered when the page loads and brought up to date by the dashboard's websocket. The dashboard
names no feature: it shows what each offers, in feature order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sessions_app.engine.contract import PANEL_HEAD, DashboardPanel
from sessions_app.engine.features import features
from sessions_app.models import AgentSession


def panels_at(place: str) -> list[DashboardPanel]:
    """The features' panels shown at `place` (`PANEL_TAB`, `PANEL_HEAD`), in feature order."""
    return [panel for panel in features().panels if panel.place == place]


def panel_render(
    panel: DashboardPanel, session: AgentSession, request: HttpRequest | None = None
) -> SafeString:
    """The panel as the page shows it: its template with the session and what it reads."""
    context = {"session": session, **panel.context(session)}
    return SafeString(render_to_string(panel.template, context, request=request))


def head_panels(session: AgentSession, request: HttpRequest | None = None) -> list[SafeString]:
    """The panels under the session's title, rendered."""
    return [panel_render(panel, session, request) for panel in panels_at(PANEL_HEAD)]


def panels_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """Every panel's fragments for a batch of the session's events, in feature order."""
    return [
        fragment
        for panel in features().panels
        if panel.live is not None
        for fragment in panel.live(session, events, operator)
    ]
