"""The notepad on the dashboard's pages: its tab of the session page (the text now, as markdown,
its latest changes and its editor), brought up to date live when the notepad changes; the
notepad as an archive found it, in the archive stepper; and its history page's URL."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from memory_app.notepad.dashboard.selectors import notepad_panel, notepad_then
from sessions_app.authors import operator_author
from sessions_app.engine.contract import ArchiveSection, DashboardPanel
from sessions_app.models import AgentSession

TEMPLATE = "notepad/dashboard.html"
PANEL_NAME = "notepad"  # its tab's
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
    name=PANEL_NAME, title="Notepad", template=f"{TEMPLATE}#panel", context=panel_context, live=panel_live
)

ARCHIVE_SECTION = ArchiveSection(template=f"{TEMPLATE}#archive", context=notepad_then)


def notepad_history_url(session_id: uuid.UUID) -> str:
    return reverse("dashboard:notepad_history", args=[session_id])
