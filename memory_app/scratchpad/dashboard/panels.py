"""The scratchpad on the dashboard's pages: its tab of the session page (each space with its use
of its limit, its latest changes and its editor), brought up to date live when a space changes,
and each space's history page's URL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from memory_app.scratchpad.dashboard.selectors import scratchpad_spaces
from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app.authors import operator_author
from sessions_app.engine.contract import DashboardPanel
from sessions_app.models import AgentSession

TEMPLATE = "scratchpad/dashboard.html"
PANEL_NAME = "scratchpad"  # its tab's
SCRATCHPAD_UPDATED = "scratchpad.updated"


def panel_context(session: AgentSession) -> dict[str, Any]:
    return {"spaces": scratchpad_spaces(session=session)}


def panel_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """After spaces changed: each of them again, and a notice of each change by someone else, so
    that an operator editing the space knows that saving will show both texts."""
    changes = [event for event in events if event["type"] == SCRATCHPAD_UPDATED]
    if not changes:
        return []
    parts: list[str] = [
        format_html(
            '<p id="scratchpad-{}-live-notice" class="notice warn live-notice" hx-swap-oob="true">'
            "The {} changed while you edit (now version {} by {}): saving will show both "
            "texts.</p>",
            str(event.get("space")),
            str(event.get("space")),
            event.get("version"),
            event.get("author"),
        )
        for event in changes
        if event.get("author") != operator_author(operator)
    ]
    touched = {str(event.get("space")) for event in changes}
    parts += [
        render_to_string(f"{TEMPLATE}#space-view", {"session": session, "oob": True, "space": space})
        for space in scratchpad_spaces(session=session)
        if space.name in touched
    ]
    return parts


PANEL = DashboardPanel(
    name="scratchpad",
    title="Scratchpad",
    template=f"{TEMPLATE}#panel",
    context=panel_context,
    live=panel_live,
)


def space_history_url(space: str) -> Callable[[uuid.UUID], str]:
    """The URL of the space's history page for a session."""
    return lambda session_id: reverse("dashboard:scratchpad_history", args=[session_id, space])


# Each space's history (a space's name is the memory's).
HISTORIES = {space: space_history_url(space) for space in ScratchpadSpace.values}
