"""Sub-sessions in the operator dashboard (seed 000's spawn_session / fork_session).

- The session list shows roots; a root with descendants has a collapsed tree of them, loaded when
  it is opened (`subtree`).
- A session page shows its parent and root, and its children with their status and what each
  reported (`family_context`, rendered by the `session_family` tag and refreshed live by
  `family_fragment` when a child is spawned or returns).
- The transcript links each spawn/fork call and its result to the child (`transcript_link_children`).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from memory_app.subsessions import selectors as subsession_selectors
from sessions_app.dashboard import selectors, transcript
from sessions_app.dashboard.auth import operator_required
from sessions_app.models import AgentSession

FAMILY_TEMPLATE = "dashboard/_subsession_family.html"
TREE_TEMPLATE = "dashboard/_subsession_tree.html"
# A root's tree shown in the session list is bounded: a runaway fan-out must not make a huge page.
TREE_ROWS_SHOWN = 200
# Events after which a session page's list of children changes.
FAMILY_EVENTS = frozenset({"session.spawned"})


# ---------------------------------------------------------------------------
# Reads
# ---------------------------------------------------------------------------
def descendant_count() -> Coalesce:
    """An annotation for the session list: how many sessions have this one as their root."""
    count = (
        AgentSession.objects.filter(root_session=OuterRef("pk"))
        .order_by()
        .values("root_session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(count, output_field=IntegerField()), 0)


def family_context(session: AgentSession) -> dict[str, Any]:
    """What a session page shows of the session's tree: its parent and root (None for a root),
    and its children with their outcomes. Three queries at most."""
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
    return {
        "session": session,
        "family_parent": parent,
        "family_root": root,
        "family_children": subsession_selectors.subsession_children(session_id=session.pk),
    }


def family_fragment(session: AgentSession) -> str:
    """The session page's family block, to swap in live (`hx-swap-oob`)."""
    return render_to_string(FAMILY_TEMPLATE, {**family_context(session), "oob": True})


def touches_family(event: dict) -> bool:
    """Whether `event` changes the session page's list of children (a child spawned or returned)."""
    return event["type"] in FAMILY_EVENTS or (
        event["type"] == "tool.result" and event.get("name") in subsession_selectors.DELEGATING_TOOLS
    )


def transcript_link_children(
    *, session_id: uuid.UUID, items: list[transcript.TranscriptItem]
) -> list[transcript.TranscriptItem]:
    """The items with each spawn/fork call linked to the child it made. One query."""
    ids = [
        use.id
        for item in items
        for use in item.tool_uses
        if use.name in subsession_selectors.DELEGATING_TOOLS
    ]
    if not ids:
        return items
    children = {
        tool_use_id: str(pk)
        for tool_use_id, pk in AgentSession.objects.filter(
            parent_session_id=session_id, spawned_by_tool_use_id__in=ids
        ).values_list("spawned_by_tool_use_id", "pk")
    }
    return [
        dataclasses.replace(
            item,
            tool_uses=[dataclasses.replace(use, child_id=children.get(use.id, "")) for use in item.tool_uses],
        )
        if item.tool_uses
        else item
        for item in items
    ]


# ---------------------------------------------------------------------------
# The session list's tree of a root
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def subtree(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    try:
        root = selectors.session_get_for_operator(session_id=session_id)
    except selectors.NotFound:
        raise Http404("No such session.") from None
    rows = subsession_selectors.subsession_tree(root_id=root.pk)
    context = {"root": root, "rows": rows[:TREE_ROWS_SHOWN], "more": max(0, len(rows) - TREE_ROWS_SHOWN)}
    return render(request, TREE_TEMPLATE, context)
