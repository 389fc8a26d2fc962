"""The dashboard's search (DESIGN.md, "Agents": `recall`): the same search a session's model
runs, for an operator, with where each hit is, and a message in its place in the transcript.

On an agent's page it searches every session of the agent (`recall_search(agent=...)`); on a
session's page the session's own scope (`recall_search(session=...)`: with an agent, its other
sessions and earlier epochs; without one, its archives). Three queries a search: the search, the
hits' message positions, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions_app.dashboard import transcript
from sessions_app.dashboard.selectors.common import NotFound
from sessions_app.dashboard.selectors.history import transcript_call_notes
from sessions_app.message_content import messages_with_content
from sessions_app.models import Agent, AgentSession, Archive, Message, ToolCall
from sessions_app.recall_selectors import RECALL_MAX_LIMIT, RecallHit, RecallQueryEmpty, recall_search

__all__ = ["DashboardHit", "MessageInPlace", "RecallQueryEmpty", "message_in_place", "search_hits"]

# Messages shown before and after a hit's message on its page.
CONTEXT_MESSAGES = 6


@dataclass(frozen=True)
class DashboardHit:
    hit: RecallHit
    # The message's position in its session (None: a summary or an offloaded result's content).
    position: int | None


def search_hits(
    *, query: str, agent: Agent | None = None, session: AgentSession | None = None
) -> list[DashboardHit]:
    """The hits of `query` (best first, at most the tool's largest limit) with their messages'
    positions. `RecallQueryEmpty` when the query has no word."""
    hits = recall_search(query=query, limit=RECALL_MAX_LIMIT, agent=agent, session=session)
    ids = [h.message_id for h in hits if h.message_id is not None]
    positions = dict(Message.objects.filter(pk__in=ids).values_list("pk", "position")) if ids else {}
    return [DashboardHit(h, positions.get(h.message_id) if h.message_id is not None else None) for h in hits]


@dataclass(frozen=True)
class MessageInPlace:
    items: list[transcript.TranscriptItem]
    position: int
    epoch: int
    archived: bool  # the message's epoch is over (its archive holds it)


def message_in_place(*, session: AgentSession, position: int) -> MessageInPlace:
    """The session's message at `position` with the messages around it, as transcript items.
    `NotFound` when the session has no message there."""
    message = Message.objects.filter(session=session, position=position).only("epoch").first()
    if message is None:
        raise NotFound
    low, high = position - CONTEXT_MESSAGES, position + CONTEXT_MESSAGES
    messages = list(
        messages_with_content(
            Message.objects.filter(session=session, position__gte=low, position__lte=high).only(
                "position", "epoch", "role", "metadata", "created_at"
            )
        ).order_by("position")
    )
    names = dict(
        ToolCall.objects.filter(
            session=session, tool_use_id__in=transcript.tool_use_ids(messages)
        ).values_list("tool_use_id", "name")
    )
    summaries = {
        str(a.pk): a for a in Archive.objects.filter(session=session, pk__in=transcript.archive_ids(messages))
    }
    items = transcript.items_from_messages(messages, tool_names=names, summaries=summaries)
    items = transcript_call_notes(session_id=session.pk, items=items)
    return MessageInPlace(items, position, message.epoch, message.epoch < session.epoch)
