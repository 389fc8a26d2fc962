"""What operators see of sub-sessions (`FEATURE.dashboard`): the session page's family block
under its title (its parent, its root, its children with what each returned), kept live, and the
tools whose calls the transcript links to the child they started."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string

from memory_app.subsessions import selectors
from sessions_app.engine.contract import PANEL_HEAD, DashboardPanel, FeatureDashboard
from sessions_app.models import AgentSession

FAMILY_TEMPLATE = "subsessions/family.html"
SPAWNED = "session.spawned"
TOOL_RESULT = "tool.result"


@dataclass(frozen=True)
class Family:
    parent: AgentSession | None
    # The root, when it is not the parent (None for a root and for a child of the root).
    root: AgentSession | None
    children: list[selectors.ChildRow]


def session_family(*, session: AgentSession) -> Family:
    """The session's parent and root, and its children with what each returned. Three queries
    at most."""
    parent = root = None
    if session.parent_session_id is not None:
        related = {
            s.pk: s
            for s in AgentSession.objects.filter(pk__in={session.parent_session_id, session.root_id}).only(
                "id", "title", "status"
            )
        }
        parent = related.get(session.parent_session_id)
        root = related.get(session.root_id) if session.root_id != session.parent_session_id else None
    return Family(parent, root, selectors.subsession_children(session_id=session.pk))


def family_context(session: AgentSession) -> dict[str, Any]:
    return {"family": session_family(session=session)}


def family_live(session: AgentSession, events: Sequence[Mapping[str, Any]], operator: str) -> list[str]:
    """The block again when a child was spawned or returned (its parent's call has its result)."""
    if not any(
        event["type"] == SPAWNED
        or (event["type"] == TOOL_RESULT and event.get("name") in selectors.DELEGATING_TOOLS)
        for event in events
    ):
        return []
    return [render_to_string(FAMILY_TEMPLATE, {"session": session, "oob": True, **family_context(session)})]


DASHBOARD = FeatureDashboard(
    panels=[
        DashboardPanel(
            name="subsessions",
            template=FAMILY_TEMPLATE,
            context=family_context,
            live=family_live,
            place=PANEL_HEAD,
        )
    ],
    delegating_tools=selectors.DELEGATING_TOOLS,
)
