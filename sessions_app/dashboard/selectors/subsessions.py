"""Trees of sessions as the dashboard shows them (a session's place in its tree is on its row:
`parent_session`, `root_session`, `depth`): how many sessions a root's tree holds and the tree
itself (the list), and which child each delegating call of a transcript started (the features'
`delegating_tools`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from sessions_app.dashboard import transcript
from sessions_app.engine.features import features
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
class TreeRow:
    session: AgentSession
    level: int  # 1 for a child of the root


def session_tree(*, root_id: uuid.UUID) -> list[TreeRow]:
    """Every descendant of the root `root_id`, depth first (children oldest first). One query."""
    by_parent: dict[uuid.UUID | None, list[AgentSession]] = defaultdict(list)
    for session in AgentSession.objects.filter(root_session_id=root_id).order_by("created_at", "pk"):
        by_parent[session.parent_session_id].append(session)
    rows: list[TreeRow] = []
    stack = [(child, 1) for child in reversed(by_parent[root_id])]
    while stack:
        session, level = stack.pop()
        rows.append(TreeRow(session, level))
        stack += [(child, level + 1) for child in reversed(by_parent[session.pk])]
    return rows


def subsession_tree_shown(*, root_id: uuid.UUID) -> tuple[list[TreeRow], int]:
    """The root's descendants as the list shows them, and how many more there are. One query."""
    rows = session_tree(root_id=root_id)
    return rows[:TREE_ROWS_SHOWN], max(0, len(rows) - TREE_ROWS_SHOWN)


def transcript_link_children(
    *, session_id: uuid.UUID, items: list[transcript.TranscriptItem]
) -> list[transcript.TranscriptItem]:
    """The items with each delegating call linked to the child it started. One query, if any."""
    delegating = features().delegating_tools
    ids = [use.id for item in items for use in item.tool_uses if use.name in delegating]
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
