"""Sub-sessions as the dashboard shows them (seed 000's spawn_session / fork_session): how many
sessions a root's tree holds (the list), a session's parent, root and children (its page), and
which child each spawn/fork call of a transcript made."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from memory_app.subsessions import selectors as subsession_selectors
from memory_app.subsessions.selectors import ChildRow, TreeRow
from sessions_app.dashboard import transcript
from sessions_app.models import AgentSession

# A root's tree shown in the session list is bounded: a runaway fan-out must not make a huge page.
TREE_ROWS_SHOWN = 200


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


@dataclass(frozen=True)
class Family:
    parent: AgentSession | None
    # The root, when it is not the parent (None for a root and for a child of the root).
    root: AgentSession | None
    children: list[ChildRow]


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
    return Family(parent, root, subsession_selectors.subsession_children(session_id=session.pk))


def subsession_tree_shown(*, root_id: uuid.UUID) -> tuple[list[TreeRow], int]:
    """The root's descendants as the list shows them, and how many more there are. One query."""
    rows = subsession_selectors.subsession_tree(root_id=root_id)
    return rows[:TREE_ROWS_SHOWN], max(0, len(rows) - TREE_ROWS_SHOWN)


def transcript_link_children(
    *, session_id: uuid.UUID, items: list[transcript.TranscriptItem]
) -> list[transcript.TranscriptItem]:
    """The items with each spawn/fork call linked to the child it made. One query, if any."""
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
