"""Agents as operators see them (DESIGN.md, "Agents"): the list, one agent, the history of its
instructions, its learned text and each skill (every version, with line diffs, built as a
memory's history page is), its state (paged by key) and its sessions.

Every page reads a bounded number of rows, whatever the agent holds: the list and the state are
paged, its sessions and skills are bounded, a history is paged by version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, DateTimeField, F, IntegerField, Max, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from sessions_app.dashboard.selectors.common import NotFound
from sessions_app.dashboard.selectors.memory_history import (
    HISTORY_PAGE_SIZE,
    Against,
    HistoryEntry,
    MemoryHistory,
    history_version_choose,
    memory_history_make,
)
from sessions_app.models import Agent, AgentPart, AgentSession, AgentSkill, AgentStateEntry, AgentVersion

AGENT_LIST_PAGE_SIZE = 50
AGENT_SESSIONS_SHOWN = 50
AGENT_SKILLS_SHOWN = 200  # DESIGN.md's `knowledge.max_skills` defaults to 64; this bounds the page anyway
AGENT_STATE_PAGE_SIZE = 50
# The owner an operator-created agent has (`owner_name` ""), as the pages name it.
OPERATORS_OWNER = "operators"
# A text part's history, as the history page names it: (memory name, what the pages call it).
TEXT_PARTS = {
    AgentPart.INSTRUCTIONS.value: "instructions",
    AgentPart.LEARNED.value: "learned text",
}


def agent_list() -> QuerySet[Agent]:
    """Every agent with `session_count`, `last_activity` (the newest of its sessions'
    `last_activity_at`, None without sessions) and `skill_count`; the most recently active first,
    agents without sessions last, then by name and owner."""
    sessions = AgentSession.objects.filter(agent=OuterRef("pk")).order_by().values("agent")
    skills = AgentSkill.objects.filter(agent=OuterRef("pk")).order_by().values("agent")
    return Agent.objects.annotate(
        session_count=Coalesce(
            Subquery(sessions.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
        last_activity=Subquery(
            sessions.annotate(at=Max("last_activity_at")).values("at"), output_field=DateTimeField()
        ),
        skill_count=Coalesce(
            Subquery(skills.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
    ).order_by(F("last_activity").desc(nulls_last=True), "name", "owner_name", "pk")


def agent_list_page(*, page: int) -> tuple[list[Agent], bool]:
    """Page `page` (from 1) of `agent_list`, and whether another page follows."""
    size = AGENT_LIST_PAGE_SIZE
    rows = list(agent_list()[(page - 1) * size : page * size + 1])
    return rows[:size], len(rows) > size


def agent_get_for_operator(*, agent_id: Any) -> Agent:
    """The agent `agent_id` (operators see every agent); `NotFound` otherwise."""
    try:
        pk = int(agent_id)
    except (TypeError, ValueError):
        raise NotFound from None
    agent = Agent.objects.filter(pk=pk).first()
    if agent is None:
        raise NotFound
    return agent


def agent_sessions(*, agent: Agent, limit: int = AGENT_SESSIONS_SHOWN) -> tuple[list[AgentSession], int]:
    """The agent's newest `limit` sessions (newest first, with their owner) and how many it has."""
    sessions = AgentSession.objects.filter(agent=agent)
    rows = list(sessions.select_related("owner").order_by("-created_at", "pk")[:limit])
    return rows, sessions.count()


def agent_skills(*, agent: Agent, limit: int = AGENT_SKILLS_SHOWN) -> list[AgentSkill]:
    """The agent's skills now, by name (at most `limit`)."""
    return list(AgentSkill.objects.filter(agent=agent).order_by("name")[:limit])


@dataclass(frozen=True)
class StatePage:
    entries: list[AgentStateEntry]
    prefix: str
    after: str  # the key this page starts after ("" on the first page)
    next_after: str | None  # the `after` of the next page, None on the last
    total: int  # keys under `prefix`


def agent_state_page(
    *, agent: Agent, prefix: str = "", after: str = "", limit: int = AGENT_STATE_PAGE_SIZE
) -> StatePage:
    """The agent's state keys (sorted) that start with `prefix`, `limit` of them after the key
    `after`, with their values, versions and authors."""
    keys = AgentStateEntry.objects.filter(agent=agent)
    if prefix:
        keys = keys.filter(key__startswith=prefix)
    page = keys.filter(key__gt=after) if after else keys
    rows = list(page.order_by("key")[: limit + 1])
    entries = rows[:limit]
    return StatePage(
        entries=entries,
        prefix=prefix,
        after=after,
        next_after=entries[-1].key if len(rows) > limit else None,
        total=keys.count(),
    )


# ---------------------------------------------------------------------------
# Histories: the instructions, the learned text, a skill
# ---------------------------------------------------------------------------
def _operation(row: AgentVersion, first: int) -> str:
    if row.restored_from is not None:
        return f"restore of v{row.restored_from}"
    if row.deleted:
        return "delete"
    return "create" if row.version == first else "edit"


def _entry(row: AgentVersion, first: int) -> HistoryEntry:
    return HistoryEntry(row.version, row.author, _operation(row, first), row.created_at)


@dataclass(frozen=True)
class PartHistory:
    """A part's history page (`history`), with what the page adds for an agent: the selected
    version's row (a skill's description is in its `extra`) and whether it restored another."""

    history: MemoryHistory
    selected_row: AgentVersion | None
    first_version: int  # the part's first version (1: the instructions and a skill start there)


def agent_part_history(
    *,
    agent: Agent,
    part: str,
    name: str = "",
    version: int | None = None,
    at: datetime | None = None,
    against: Against = "previous",
    before: int | None = None,
    limit: int = HISTORY_PAGE_SIZE,
) -> PartHistory:
    """The history of the agent's instructions, learned text or skill `name`, with version
    `version` selected (or the one current at `at`, or the latest), compared with the version
    before it or with the text now. `NotFound` for a version never written (or a skill the agent
    never had). Version 0 is the learned text before its first change (empty)."""
    versions = AgentVersion.objects.filter(agent=agent, part=part, name=name)
    if part == AgentPart.INSTRUCTIONS:
        current, current_text = agent.instructions_version, agent.instructions
    elif part == AgentPart.LEARNED:
        current, current_text = agent.learned_version, agent.learned
    else:
        latest = versions.order_by("-version").first()
        if latest is None:
            raise NotFound
        current, current_text = latest.version, "" if latest.deleted else latest.content
    first = versions.order_by("version").values_list("version", flat=True).first() or 1
    as_of = None
    if at is not None:
        then = versions.filter(created_at__lte=at).order_by("-version").first()
        as_of = then.version if then is not None else 0
    chosen = history_version_choose(version=version, current=current, as_of=as_of)
    if chosen != 0 and chosen < first:
        raise NotFound
    page = versions.filter(version__lt=before) if before is not None else versions
    rows = list(page.order_by("-version")[: limit + 1])
    selected_row: AgentVersion | None = None
    text = previous = ""
    previous_version: int | None = None
    if chosen > 0:
        selected_row = versions.filter(version=chosen).first()
        if selected_row is None:
            raise NotFound
        text = "" if selected_row.deleted else selected_row.content
        if against == "previous":
            prior = versions.filter(version__lt=chosen).order_by("-version").first()
            if prior is not None:
                previous, previous_version = ("" if prior.deleted else prior.content), prior.version
    history = memory_history_make(
        memory=TEXT_PARTS.get(part, name),
        current_version=current,
        current_text=current_text,
        rows=[_entry(r, first) for r in rows],
        limit=limit,
        selected=_entry(selected_row, first) if selected_row is not None else None,
        selected_version=chosen,
        text=text,
        against=against,
        previous_text=previous,
        previous_version=previous_version,
    )
    return PartHistory(history=history, selected_row=selected_row, first_version=first)


def agent_versions_latest(*, agent: Agent, part: str, limit: int) -> list[HistoryEntry]:
    """The part's latest `limit` versions, newest first (the agent page's short list)."""
    versions = AgentVersion.objects.filter(agent=agent, part=part, name="")
    first = versions.order_by("version").values_list("version", flat=True).first() or 1
    return [_entry(row, first) for row in versions.order_by("-version")[:limit]]
