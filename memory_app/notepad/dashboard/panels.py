"""The notepad's tab of the session page: the text now (markdown), its latest changes and its
editor, brought up to date live when the notepad changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html

from memory_app.notepad.dashboard.selectors import notepad_panel
from sessions_app.authors import operator_author
from sessions_app.engine.contract import DashboardPanel
from sessions_app.models import AgentSession

TEMPLATE = "notepad/dashboard.html"
NOTEPAD_UPDATED = "notepad.updated"


def panel_context(session: AgentSession) -> dict[str, Any]:
    return notepad_panel(session_id=session.pk)


def panel_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """After the notepad changed: its view and revisions again, and a notice of each change by
    someone else, so that an operator editing it knows that saving will show both texts."""
    changes = [event for event in events if event["type"] == NOTEPAD_UPDATED]
    if not changes:
        return []
    parts: list[str] = [
        format_html(
            '<p id="notepad-live-notice" class="notice warn live-notice" hx-swap-oob="true">'
            "The notepad changed while you edit (now version {} by {}): saving will show both "
            "texts.</p>",
            event.get("version"),
            event.get("author"),
        )
        for event in changes
        if event.get("author") != operator_author(operator)
    ]
    context = {"session": session, "oob": True, **notepad_panel(session_id=session.pk)}
    parts.append(render_to_string(f"{TEMPLATE}#view", context))
    parts.append(render_to_string(f"{TEMPLATE}#revisions", context))
    return parts


PANEL = DashboardPanel(
    name="notepad", title="Notepad", template=f"{TEMPLATE}#panel", context=panel_context, live=panel_live
)
