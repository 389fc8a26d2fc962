"""The writes of a session's import (docs/export.md): its row, its core tables, the request parts
its model calls name, and the copy of its agent. The engine's import (`engine.transfer`) calls
them inside its one transaction, with a document whose ids are already the new session's: each
checks its part of the document as it reads it (`transfer_rows.DocumentError` naming the field)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.utils import timezone

from sessions_app.models import (
    AgentSession,
    AgentToken,
    Archive,
    Message,
    RecallDocument,
    RequestPart,
    SessionStatus,
)
from sessions_app.services.recall import recall_message_index
from sessions_app.transfer_rows import DocumentError, list_at, row_import, value_import
from sessions_app.transfer_selectors import SESSION_FIELDS, TABLES, Table

BATCH_ROWS = 200
# An imported session is idle, or ended if it had ended (docs/export.md): no turn runs in it.
_STATUS_ON_IMPORT = {SessionStatus.ENDED: SessionStatus.ENDED}


def session_row_import(
    *, data: Any, owner: AgentToken, agent_id: int | None, where: str, root: tuple[uuid.UUID, int] | None
) -> AgentSession:
    """Insert the session's row from the document's `session` (ids already new), owned by
    `owner`: idle (ended if it had ended), no turn, no lease. `root`: None for the document's
    top session, which becomes a root (a sub-session exported alone has no parent here); for
    the others, the imported root's id and the depth the top session had, so that the tree
    keeps its shape below it."""
    session = row_import(
        AgentSession,
        data,
        fields=SESSION_FIELDS,
        where=where,
        fixed={
            "owner": owner,
            "agent_id": agent_id,
            "current_turn_id": None,
            "lease_expires_at": None,
            "lease_holder": None,
            "lease_host": "",
            "lease_pid": None,
            "cancel_requested": False,
            # A new session of its owner: listed, paged and counted by its quota from now.
            "created_at": timezone.now(),
        },
    )
    if root is None:
        session.parent_session_id = session.root_session_id = None
        session.depth = 0
        session.spawn_mode = session.spawned_by_tool_use_id = ""
    else:
        session.root_session_id = root[0]
        session.depth -= root[1]
        if session.parent_session_id is None or session.depth < 1:
            raise DocumentError(f"{where}.depth", "a sub-session must be deeper than its parent")
    session.status = _STATUS_ON_IMPORT.get(session.status, SessionStatus.IDLE)
    if session.status == SessionStatus.ENDED and session.ended_at is None:
        raise DocumentError(f"{where}.ended_at", "an ended session needs the time it ended")
    if session.ended_at is not None:
        # Ended on import, as far as retention (PALIMPSEST_RETENTION_DAYS) counts: an old ended
        # session is not purged by the next sweep after its import.
        session.ended_at = timezone.now()
    if not 0 < session.compact_threshold <= 1:
        raise DocumentError(f"{where}.compact_threshold", "must be above 0 and at most 1")
    if session.context_window <= 0:
        raise DocumentError(f"{where}.context_window", "must be positive")
    tree = (session.parent_session_id is None, session.root_session_id is None, session.depth == 0)
    if len(set(tree)) != 1:
        raise DocumentError(where, "a root has no parent, no root and depth 0; a child has all three")
    for name, kind in (("settings", dict), ("client_tools", list), ("context_pins", dict)):
        if not isinstance(getattr(session, name), kind):
            raise DocumentError(f"{where}.{name}", f"must be {'an object' if kind is dict else 'a list'}")
    session.save(force_insert=True)
    return session


def session_tables_import(
    *, session_id: uuid.UUID, data: Any, where: str, tree: frozenset[uuid.UUID] = frozenset()
) -> None:
    """Insert the session's core tables from the document (turns, messages with their contents,
    tool calls, archives, masked results, model calls, events, search documents). `tree`: the
    sessions of this import (a fork's copy shares the content of its holder again when the
    holder is one of them, imported before it)."""
    for table in TABLES:
        items = list_at(data, table.name, where)
        _table_import(table, session_id, items, f"{where}.{table.name}" if where else table.name, tree)


def _table_import(
    table: Table, session_id: uuid.UUID, items: list[Any], where: str, tree: frozenset[uuid.UUID]
) -> None:
    positions: dict[int, int] = {}
    if table.model is RecallDocument:
        positions = dict(Message.objects.filter(session_id=session_id).values_list("position", "pk"))
    rows = []
    unshared: list[Message] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        fixed: dict[str, Any] = {"session_id": session_id}
        if table.model is RecallDocument:
            fixed["message_id"] = _message_id(item, positions, at)
        row = row_import(table.model, item, fields=table.fields, where=at, fixed=fixed)
        if table.model is Message:
            if not isinstance(row.content, list) or not all(
                isinstance(block, dict) and isinstance(block.get("type"), str) for block in row.content
            ):
                raise DocumentError(f"{at}.content", "must be a list of content blocks (objects with a type)")
            holder = _holder(item, tree, at)
            if holder is not None:
                row.content, row.content_source_id = None, holder
            elif isinstance(item.get("content_source"), dict):
                unshared.append(row)
        rows.append(row)
    if table.model is Archive:
        # One by one, in epoch order: each names the one before it.
        for row in sorted(rows, key=lambda r: r.epoch):
            row.save(force_insert=True)
        return
    table.model.objects.bulk_create(rows, batch_size=BATCH_ROWS)  # type: ignore[attr-defined]
    for message in unshared:
        # A copy whose holder stayed behind holds its content now: its own search document
        # stands for it (the holder's did before).
        recall_message_index(
            session_id=session_id,
            epoch=message.epoch,
            role=message.role,
            content=message.content,
            metadata=message.metadata,
            at=message.created_at,
            position=message.position,
        )


def _holder(item: dict[str, Any], tree: frozenset[uuid.UUID], at: str) -> int | None:
    """The id of the imported message a fork's copy shares its content with (None: it holds its
    own, its holder not being part of this import)."""
    if "content_source" not in item:
        raise DocumentError(f"{at}.content_source", "is missing")
    source = item["content_source"]
    if source is None:
        return None
    if not isinstance(source, dict):
        raise DocumentError(f"{at}.content_source", "must be an object or null")
    session_id = field_check(
        Message, "session_id", source.get("session_id"), f"{at}.content_source.session_id"
    )
    position = field_check(Message, "position", source.get("position"), f"{at}.content_source.position")
    if session_id not in tree:
        return None
    holder = (
        Message.objects.filter(session_id=session_id, position=position, content_source__isnull=True)
        .values_list("pk", flat=True)
        .first()
    )
    if holder is None:
        raise DocumentError(f"{at}.content_source", "names no message of an earlier session of the document")
    return holder


def _message_id(item: Any, positions: dict[int, int], at: str) -> int | None:
    if not isinstance(item, dict) or "message_position" not in item:
        raise DocumentError(f"{at}.message_position", "is missing")
    position = item["message_position"]
    if position is None:
        return None
    if isinstance(position, bool) or not isinstance(position, int) or position not in positions:
        raise DocumentError(f"{at}.message_position", "names no message of the session")
    return positions[position]


def request_parts_import(*, parts: Any) -> None:
    """Store the request parts the document's model calls name, each checked against its hash
    (a part already stored is kept)."""
    if not isinstance(parts, dict):
        raise DocumentError("request_parts", "must be an object")
    rows = []
    for digest, text in parts.items():
        if not isinstance(text, str) or hashlib.sha256(text.encode()).hexdigest() != digest:
            raise DocumentError(f"request_parts.{digest}", "is not the text of this SHA-256")
        rows.append(RequestPart(sha256=digest, text=text))
    RequestPart.objects.bulk_create(rows, ignore_conflicts=True)


def field_check(model: type, attname: str, value: Any, where: str) -> Any:
    """A single value checked as `model`'s field `attname` takes it."""
    field = next(f for f in model._meta.concrete_fields if f.attname == attname)  # type: ignore[attr-defined]
    return value_import(field, value, where)
