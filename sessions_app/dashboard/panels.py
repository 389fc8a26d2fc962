"""What the features show on the dashboard (`FeatureDashboard`), as the dashboard's pages use it:
the parts of the session page they fill (`DashboardPanel`s), rendered when the page loads and
brought up to date by the dashboard's websocket; the page's tabs (its own and the features'
panels, each with its key); the archive stepper's sections; the memories with a history. The
dashboard names no feature: it shows what each offers, in feature order."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sessions_app.engine.contract import PANEL_AGENT, PANEL_HEAD, PANEL_TAB, DashboardPanel
from sessions_app.engine.features import features
from sessions_app.models import Agent, AgentSession, Archive

TRANSCRIPT_TAB = "transcript"
DEFAULT_TAB = "context"
# The page's own tabs, before and after the features': the transcript is a tab only where the
# page is too narrow for the side panels (dashboard.css).
FIRST_TABS = ((TRANSCRIPT_TAB, "Transcript"), (DEFAULT_TAB, "Context"))
LAST_TABS = (("archives", "Archives"), ("inspector", "Prompt"), ("timeline", "Timeline"))
# Other names a tab is asked for by (the inspector's label is "Prompt").
TAB_ALIASES = {"prompt": "inspector"}
# Tabs have the keys 0 to 9, in order (dashboard.js); any after the tenth has none.
TAB_KEYS = 10


@dataclass(frozen=True)
class Tab:
    name: str
    label: str
    key: str  # the key that opens it, "" for none


def session_tabs() -> list[Tab]:
    """The session page's tabs, in order: the transcript and the context, the features' panels,
    then archives, the prompt inspector and the timeline."""
    named = [
        *FIRST_TABS,
        *((panel.name, panel.title) for panel in panels_at(PANEL_TAB)),
        *LAST_TABS,
    ]
    if len({name for name, _ in named}) < len(named):
        raise ValueError(f"a feature's panel has the name of another tab: {[name for name, _ in named]}")
    return [
        Tab(name, label, str(index) if index < TAB_KEYS else "") for index, (name, label) in enumerate(named)
    ]


def panels_at(place: str) -> list[DashboardPanel]:
    """The features' panels shown at `place` (`PANEL_TAB`, `PANEL_HEAD`), in feature order."""
    return [panel for panel in features().panels if panel.place == place]


def panel_render(
    panel: DashboardPanel, session: AgentSession, request: HttpRequest | None = None
) -> SafeString:
    """The panel as the page shows it: its template with the session and what it reads."""
    context = {"session": session, **panel.context(session)}
    # A rendered template: autoescaped, so safe as a whole.
    return SafeString(render_to_string(panel.template, context, request=request))


@dataclass(frozen=True)
class RenderedPanel:
    name: str
    html: SafeString


def tab_panels(session: AgentSession, request: HttpRequest | None = None) -> list[RenderedPanel]:
    """The features' tab panels, rendered."""
    return [
        RenderedPanel(panel.name, panel_render(panel, session, request)) for panel in panels_at(PANEL_TAB)
    ]


def head_panels(session: AgentSession, request: HttpRequest | None = None) -> list[SafeString]:
    """The panels under the session's title, rendered."""
    return [panel_render(panel, session, request) for panel in panels_at(PANEL_HEAD)]


def agent_panels(agent: Agent, request: HttpRequest | None = None) -> list[SafeString]:
    """The features' parts of an agent's page (`PANEL_AGENT`), rendered, in feature order."""
    return [
        SafeString(
            render_to_string(panel.template, {"agent": agent, **panel.context(agent)}, request=request)
        )
        for panel in panels_at(PANEL_AGENT)
    ]


def panels_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """Every panel's fragments for a batch of the session's events, in feature order."""
    return [
        fragment
        for panel in features().panels
        if panel.live is not None and panel.place != PANEL_AGENT
        for fragment in panel.live(session, events, operator)
    ]


def archive_sections(
    session: AgentSession, archive: Archive, request: HttpRequest | None = None
) -> list[SafeString]:
    """What each feature shows of itself as it stood when `archive` was made, rendered."""
    return [
        SafeString(
            render_to_string(
                section.template,
                {"session": session, **section.context(session.pk, archive.created_at)},
                request=request,
            )
        )
        for section in features().archive_sections
    ]


def memory_history_links(session_id: uuid.UUID) -> list[tuple[str, str]]:
    """Every memory the features keep a history of, with its history page's URL, in order."""
    return [(name, url(session_id)) for name, url in features().memory_histories.items()]
