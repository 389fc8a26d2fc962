"""The session list: every session, filtered and searched, with its counts."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from sessions_app.dashboard.selectors.common import uuid_or_not_found
from sessions_app.dashboard.selectors.subsessions import descendant_count
from sessions_app.models import AgentSession, Archive, Message, SessionStatus

SESSION_LIST_PAGE_SIZE = 50


def _count_of(model: Any) -> Coalesce:
    counted = (
        model.objects.filter(session=OuterRef("pk"))
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def session_list(*, query: str = "", status: str = "", model: str = "") -> QuerySet[AgentSession]:
    """Sessions, latest activity first, with `message_count`, `compaction_count` and
    `descendant_count` (sub-sessions).

    `query` matches the title, the model, the owner's token name or the start of the id. Without
    one, only roots are listed: sub-sessions are shown under their root.
    """
    sessions = AgentSession.objects.select_related("owner").annotate(
        message_count=_count_of(Message),
        compaction_count=_count_of(Archive),
        descendant_count=descendant_count(),
    )
    if not query.strip():
        sessions = sessions.filter(parent_session__isnull=True)
    if status in SessionStatus.values:
        sessions = sessions.filter(status=status)
    if model:
        sessions = sessions.filter(model=model)
    query = query.strip()
    if query:
        match = Q(title__icontains=query) | Q(model__icontains=query) | Q(owner__name__icontains=query)
        hex_part = query.replace("-", "").lower()
        if hex_part and all(c in "0123456789abcdef" for c in hex_part):
            try:
                match |= Q(pk=uuid.UUID(query))
            except ValueError:
                match |= Q(pk__istartswith=query.lower())
        sessions = sessions.filter(match)
    return sessions.order_by("-last_activity_at")


def session_list_row(
    *, session_id: Any, query: str = "", status: str = "", model: str = ""
) -> AgentSession | None:
    """One session of `session_list` (None when it does not match the filters)."""
    return (
        session_list(query=query, status=status, model=model).filter(pk=uuid_or_not_found(session_id)).first()
    )


def session_models() -> list[str]:
    return list(AgentSession.objects.order_by("model").values_list("model", flat=True).distinct())
