"""The reads of a session's export (docs/export.md): its row, its agent's copy and its core tables,
page by page.

Every page is one query ordered by a key and bounded by the key of the previous page's last row
(keyset paging): no cursor stays open between pages, so the engine's export can read each page
in whichever database thread is free and stream it out before reading the next, never holding a
session's messages in memory. What a session's row said when the export began bounds the rest
(messages below its `next_position`, events up to its `last_seq`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import F

from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import (
    Agent,
    AgentSession,
    Archive,
    MaskedResult,
    Message,
    ModelCall,
    RecallDocument,
    RequestPart,
    SessionEvent,
    ToolCall,
    Turn,
)
from sessions_app.transfer_rows import row_export, values_export

PAGE_ROWS = 200

SESSION_FIELDS = (
    "id",
    "parent_session_id",
    "root_session_id",
    "depth",
    "spawn_mode",
    "spawned_by_tool_use_id",
    "title",
    "model",
    "system_prompt",
    "context_window",
    "compact_threshold",
    "settings",
    "client_tools",
    "status",
    "ended_at",
    "epoch",
    "last_seq",
    "next_position",
    "last_prompt_tokens",
    "last_estimated_tokens",
    "token_ratio",
    "last_activity_at",
    "notepad",
    "notepad_version",
    "context_pins",
    "compaction_failures",
    "usage_model_calls",
    "usage_input_tokens",
    "usage_output_tokens",
    "usage_cache_creation_tokens",
    "usage_cache_read_tokens",
    "created_at",
)
TURN_FIELDS = ("id", "started_at", "ended_at", "steps", "stop_reason", "error")
MESSAGE_FIELDS = (
    "position",
    "epoch",
    "role",
    "content",
    "token_estimate",
    "turn_id",
    "metadata",
    "created_at",
)
TOOL_CALL_FIELDS = (
    "turn_id",
    "tool_use_id",
    "name",
    "input",
    "executor",
    "status",
    "result",
    "is_error",
    "created_at",
    "completed_at",
    # Tool approvals (docs/approvals.md): whether the call was asked about, the answer, by whom.
    "approval",
    "approval_reason",
    "approval_author",
    "approval_at",
    "started_at",
)
ARCHIVE_FIELDS = (
    "id",
    "epoch",
    "summary",
    "message_count",
    "tokens_before",
    "tokens_after",
    "previous_id",
    "created_at",
    "trigger",
    "duration_ms",
    "kept_messages",
    "masked",
    "kind",
)
MASKED_FIELDS = ("epoch", "tool_use_id", "observation_id", "size_chars", "placeholder", "created_at")
MODEL_CALL_FIELDS = (
    "turn_id",
    "step",
    "purpose",
    "provider",
    "model",
    "request",
    "request_sha256",
    "request_bytes",
    "stable_prefix_bytes",
    "estimated_prompt_tokens",
    "predicted_prompt_tokens",
    "response",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "error",
    "started_at",
    "duration_ms",
    "first_token_ms",
)
EVENT_FIELDS = ("seq", "type", "payload", "created_at")
# A search document names its message by position (`message_position`, null for a summary's or
# an observation's): message ids are the database's own.
RECALL_FIELDS = ("epoch", "kind", "role", "ref", "at", "text")


def session_export_row(*, session_id: uuid.UUID) -> dict[str, Any]:
    """The session's row (with its agent's name) as the document's `session`."""
    session = AgentSession.objects.select_related("agent").get(pk=session_id)
    row = row_export(session, SESSION_FIELDS)
    row["agent"] = session.agent.name if session.agent is not None else None
    return row


def agent_export(*, session_id: uuid.UUID) -> dict[str, Any] | None:
    """The copy of the session's agent the document carries: what an importer without an agent
    of that name creates it from (its instructions, learned text, model, settings, skills and
    authored tools as they are now)."""
    agent_id = AgentSession.objects.filter(pk=session_id).values_list("agent_id", flat=True).get()
    if agent_id is None:
        return None
    agent = Agent.objects.get(pk=agent_id)
    return {
        "name": agent.name,
        "instructions": agent.instructions,
        "learned": agent.learned,
        "model": agent.model,
        "settings": agent.settings,
        "skills": [
            {"name": s.name, "description": s.description, "content": s.content}
            for s in agent.skills.order_by("name")
        ],
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
                "code": t.code,
                "enabled": t.enabled,
            }
            for t in agent.tools.order_by("name")
        ],
    }


def children_ids(*, session_id: uuid.UUID) -> list[uuid.UUID]:
    return list(
        AgentSession.objects.filter(parent_session_id=session_id)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )


@dataclass(frozen=True)
class Table:
    """One of a session's core tables as the document lists it: `key` orders and pages it."""

    name: str
    model: type[models.Model]
    fields: tuple[str, ...]
    key: str


TABLES = (
    Table("turns", Turn, TURN_FIELDS, "id"),
    Table("messages", Message, MESSAGE_FIELDS, "position"),
    Table("tool_calls", ToolCall, TOOL_CALL_FIELDS, "id"),
    Table("archives", Archive, ARCHIVE_FIELDS, "epoch"),
    Table("masked_results", MaskedResult, MASKED_FIELDS, "id"),
    Table("model_calls", ModelCall, MODEL_CALL_FIELDS, "id"),
    Table("events", SessionEvent, EVENT_FIELDS, "seq"),
    Table("recall_documents", RecallDocument, RECALL_FIELDS, "id"),
)


def table_page(
    *, table: Table, session_id: uuid.UUID, after: Any, bound: dict[str, int]
) -> tuple[list[dict[str, Any]], Any]:
    """A page of the session's rows of `table` after the key `after` (None: from the first), and
    the key to read the next page after (None: that was the last). `bound`: the session row's
    `next_position` and `last_seq` when the export began."""
    qs = table.model.objects.filter(session_id=session_id).order_by(table.key)  # type: ignore[attr-defined]
    if after is not None:
        qs = qs.filter(**{f"{table.key}__gt": after})
    if table.model is Message:
        qs = messages_with_content(qs.filter(position__lt=bound["next_position"])).annotate(
            source_session=F("content_source__session_id"), source_position=F("content_source__position")
        )
    elif table.model is SessionEvent:
        qs = qs.filter(seq__lte=bound["last_seq"])
    rows = list(qs[:PAGE_ROWS])
    items = [_item(table, row) for row in rows]
    if table.model is RecallDocument:
        _positions(rows, items)
    last = getattr(rows[-1], table.key) if len(rows) == PAGE_ROWS else None
    return items, last


def _item(table: Table, row: Any) -> dict[str, Any]:
    if table.model is Message:
        # `content` is deferred (a copy's is its holder's): never read from the row itself.
        item = row_export(row, [name for name in table.fields if name != "content"])
        # Its content always; and a fork's copy names the message it shares it with, which the
        # import shares it with again when that message is imported with it.
        item["content"] = resolved(row)
        item["content_source"] = (
            {"session_id": str(row.source_session), "position": row.source_position}
            if row.content_source_id is not None
            else None
        )
        return item
    return row_export(row, table.fields)


def _positions(rows: list[Any], items: list[dict[str, Any]]) -> None:
    ids = [row.message_id for row in rows if row.message_id is not None]
    positions = dict(Message.objects.filter(pk__in=ids).values_list("pk", "position"))
    for row, item in zip(rows, items, strict=True):
        item["message_position"] = positions.get(row.message_id) if row.message_id is not None else None


def request_parts(*, session_id: uuid.UUID) -> dict[str, str]:
    """The request parts (`RequestPart`) the session's model calls name: sha256 → text."""
    names: set[str] = set()
    for request in (
        ModelCall.objects.filter(session_id=session_id)
        .values_list("request", flat=True)
        .iterator(chunk_size=PAGE_ROWS)
    ):
        names.update(_part_names(request))
    return dict(RequestPart.objects.filter(pk__in=names).values_list("sha256", "text"))


def _part_names(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if set(value) == {"$part"} and isinstance(value["$part"], str):
            yield value["$part"]
            return
        for inner in value.values():
            yield from _part_names(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _part_names(inner)


def session_bound(*, session_id: uuid.UUID) -> dict[str, int]:
    values = AgentSession.objects.filter(pk=session_id).values("next_position", "last_seq").get()
    return dict(values_export(values, ("next_position", "last_seq")))
