"""The session list: every session, filtered and searched, with its counts."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from sessions_app.dashboard.list_filters import OWNER_OPERATOR
from sessions_app.dashboard.selectors.common import uuid_or_not_found
from sessions_app.dashboard.selectors.subsessions import descendant_count
from sessions_app.engine.providers import models_priced
from sessions_app.models import AgentSession, AgentToken, Archive, Message, SessionStatus
from sessions_app.usage import cost_expression, total_tokens_expression

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


# How each sortable column of the list sorts (`list_filters.SORT_COLUMNS`); ties go to the latest
# activity. Sessions without a cost (a model without a price) come last either way.
_SORT_FIELDS = {
    "title": "title",
    "status": "status",
    "model": "model",
    "activity": "last_activity_at",
    "messages": "message_count",
    "compactions": "compaction_count",
    "tokens": "usage_total_tokens",
    "cost": "usage_cost",
}


def session_list(
    *,
    query: str = "",
    status: str = "",
    model: str = "",
    owner: str = "",
    has_children: bool | None = None,
    sort: str = "-activity",
) -> QuerySet[AgentSession]:
    """Sessions, sorted by `sort` (a column of `_SORT_FIELDS`, `-` first for descending; latest
    activity first by default), with `message_count`, `compaction_count`, `descendant_count`
    (sub-sessions), `usage_total_tokens` and `usage_cost` (estimated USD, None without a price).

    `query` matches the title, the model, the owner's (the client's) token name, the agent's name
    or the start of the id. Without
    one, only roots are listed: sub-sessions are shown under their root. `owner` is a token's
    name, or `operator` for sessions no client owns; `has_children` keeps the sessions with (True)
    or without (False) sub-sessions.
    """
    sessions = AgentSession.objects.select_related("owner", "agent").annotate(
        message_count=_count_of(Message),
        compaction_count=_count_of(Archive),
        descendant_count=descendant_count(),
        usage_total_tokens=total_tokens_expression(),
        usage_cost=cost_expression(priced=models_priced()),
    )
    if not query.strip():
        sessions = sessions.filter(parent_session__isnull=True)
    if status in SessionStatus.values:
        sessions = sessions.filter(status=status)
    if model:
        sessions = sessions.filter(model=model)
    if owner == OWNER_OPERATOR:
        sessions = sessions.filter(owner__isnull=True)
    elif owner:
        sessions = sessions.filter(owner__name=owner)
    if has_children is not None:
        with_children = Exists(AgentSession.objects.filter(parent_session=OuterRef("pk")))
        sessions = sessions.filter(with_children if has_children else ~with_children)
    query = query.strip()
    if query:
        match = (
            Q(title__icontains=query)
            | Q(model__icontains=query)
            | Q(owner__name__icontains=query)
            | Q(agent__name__icontains=query)
        )
        hex_part = query.replace("-", "").lower()
        if hex_part and all(c in "0123456789abcdef" for c in hex_part):
            try:
                match |= Q(pk=uuid.UUID(query))
            except ValueError:
                match |= Q(pk__istartswith=query.lower())
        sessions = sessions.filter(match)
    field = F(_SORT_FIELDS.get(sort.lstrip("-"), "last_activity_at"))
    order = field.desc(nulls_last=True) if sort.startswith("-") else field.asc(nulls_last=True)
    return sessions.order_by(order, "-last_activity_at", "pk")


def session_list_row(*, session_id: Any, **filters: Any) -> AgentSession | None:
    """One session of `session_list` (None when it does not match the filters)."""
    return session_list(**filters).filter(pk=uuid_or_not_found(session_id)).first()


def session_owners() -> list[str]:
    """The names of the agent tokens that own sessions (the list's owner filter)."""
    return list(
        AgentToken.objects.filter(sessions__isnull=False)
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()
    )


def session_models() -> list[str]:
    return list(AgentSession.objects.order_by("model").values_list("model", flat=True).distinct())
