"""Every query a consumer, view, tool or the engine needs about sessions."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import F, IntegerField, JSONField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from sessions_app.common.approvals import APPROVAL_PENDING, input_sha256
from sessions_app.common.canonical import canonical_json
from sessions_app.common.request_record import MESSAGE_KEY, RUN_KEY, message_rebuilt
from sessions_app.message_content import content_sql, message_rows_after, messages_with_content, resolved
from sessions_app.models import (
    Agent,
    AgentSession,
    AgentToken,
    Archive,
    Message,
    ModelCall,
    RequestPart,
    SessionEvent,
    SessionStatus,
    ToolCall,
    ToolCallStatus,
    ToolExecutor,
)

EVENT_PAGE_SIZE = 500


class SessionNotFound(Exception):
    """No such session for this caller. Also raised for another client's session: nothing is revealed."""


def session_get_for_token(*, session_id: Any, token: AgentToken) -> AgentSession:
    """The session if `token`'s client owns it (a token of the same name made it); else
    `SessionNotFound` (malformed ids included)."""
    try:
        sid = uuid.UUID(str(session_id))
    except (ValueError, TypeError, AttributeError) as exc:
        raise SessionNotFound from exc
    # Owned by the client, known by its token's name (PROTOCOL.md v1.2): a rotated token of the
    # same name keeps the sessions of the old one.
    session = AgentSession.objects.filter(pk=sid, owner__name=token.name).first()
    if session is None:
        raise SessionNotFound
    return session


def session_get(*, session_id: uuid.UUID) -> AgentSession:
    """The session `session_id`, for the engine running its turn (which has its id from the turn
    it runs; a client's or operator's request goes through an access selector instead)."""
    return AgentSession.objects.get(pk=session_id)


def session_public_state(*, session: AgentSession, server_tools: list[str], provider: str) -> dict[str, Any]:
    """The session as clients see it (`session` in session.created / session.state). Additions:
    `server_tools`, the server tools its model is offered now (each feature's switches and the
    server's own, e.g. PALIMPSEST_SANDBOX), and `sandbox`, whether `run_sandbox_code` is among them."""
    offered = server_tools
    return {
        "id": str(session.id),
        "title": session.title,
        "model": session.model,
        "system_prompt": session.system_prompt,
        "context_window": session.context_window,
        "compact_threshold": session.compact_threshold,
        "tools": session.client_tools,
        "settings": session.settings,
        "status": session.status,
        # PROTOCOL.md v1.2: the session's agent by name, or null.
        "agent": (
            Agent.objects.filter(pk=session.agent_id).values_list("name", flat=True).first()
            if session.agent_id is not None
            else None
        ),
        "epoch": session.epoch,
        "last_seq": session.last_seq,
        "last_prompt_tokens": session.last_prompt_tokens,
        "turn_id": str(session.current_turn_id) if session.current_turn_id else None,
        "created_at": session.created_at.isoformat(),
        "last_activity_at": session.last_activity_at.isoformat(),
        "server_tools": offered,
        # v1.2: the provider that answers it (the scripted model answers every model on a
        # server without a provider key).
        "provider": provider,
        "sandbox": "run_sandbox_code" in offered,
        # v1.1 (sub-sessions): where the session sits in its tree; a root is its own root.
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "root_session_id": str(session.root_id),
        "depth": session.depth,
    }


def session_descendants(*, session: AgentSession) -> list[AgentSession]:
    """Every sub-session below `session` (children, their children, ...), level by level, oldest
    first within a level. One query over the session's tree."""
    tree = AgentSession.objects.filter(root_session_id=session.root_id).order_by("depth", "created_at", "pk")
    below: list[AgentSession] = []
    wanted = {session.pk}
    for candidate in tree:
        if candidate.parent_session_id in wanted:
            below.append(candidate)
            wanted.add(candidate.pk)
    return below


def client_tool_call_session(*, session_id: uuid.UUID, tool_use_id: str) -> uuid.UUID:
    """Which session of the tree below (and including) `session_id` holds the client tool call
    `tool_use_id` (a child's calls reach its ancestors' connections): the session itself if the
    call is its own or nobody's, else the descendant waiting for it."""
    session = AgentSession.objects.only("id", "root_session_id").get(pk=session_id)
    ids = [session.pk, *(s.pk for s in session_descendants(session=session))]
    holders = dict(
        ToolCall.objects.filter(
            session_id__in=ids, tool_use_id=tool_use_id, executor=ToolExecutor.CLIENT
        ).values_list("session_id", "status")
    )
    if not holders or session.pk in holders:
        return session.pk
    waiting = [sid for sid, status in holders.items() if status == ToolCallStatus.PENDING]
    return (waiting or list(holders))[0]


def approval_call_session(*, session_id: uuid.UUID, tool_use_id: str) -> uuid.UUID:
    """Which session of the tree below (and including) `session_id` holds the tool call
    `tool_use_id` that an approval answers (a child's `tool.approval_requested` reaches its
    ancestors' connections): the session itself if the call is its own or nobody's, else the
    descendant whose call waits (or, none waiting, one that has it)."""
    session = AgentSession.objects.only("id", "root_session_id").get(pk=session_id)
    ids = [session.pk, *(s.pk for s in session_descendants(session=session))]
    holders = dict(
        ToolCall.objects.filter(session_id__in=ids, tool_use_id=tool_use_id).values_list(
            "session_id", "approval"
        )
    )
    if not holders or session.pk in holders:
        return session.pk
    waiting = [sid for sid, approval in holders.items() if approval == APPROVAL_PENDING]
    return (waiting or list(holders))[0]


def session_last_seqs(*, session_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """The last event seq of each of `session_ids` that exists (one query)."""
    return dict(AgentSession.objects.filter(pk__in=session_ids).values_list("pk", "last_seq"))


def session_events_after(
    *, session_id: uuid.UUID, after_seq: int, upto_seq: int | None = None, limit: int = EVENT_PAGE_SIZE
) -> list[dict[str, Any]]:
    """Up to `limit` event frames with `after_seq < seq (<= upto_seq)`, in order."""
    qs = SessionEvent.objects.filter(session_id=session_id, seq__gt=after_seq)
    if upto_seq is not None:
        qs = qs.filter(seq__lte=upto_seq)
    return [event.as_frame() for event in qs.order_by("seq")[:limit]]


class MessageRow(NamedTuple):
    """What the engine's prepared history keeps of a stored message."""

    position: int
    role: str
    content: list[dict]
    token_estimate: int


def session_messages_after(*, session_id: uuid.UUID, epoch: int, after_position: int) -> list[MessageRow]:
    """The epoch's messages after `after_position`, in order, with what the engine's prepared
    history keeps of each. Every turn reads it (usually one or two new rows, the whole epoch for
    a history not cached): SQL built once (`fastpath.rows`), rows not made into models."""
    return [
        MessageRow(*row)
        for row in message_rows_after(session_id=session_id, epoch=epoch, after_position=after_position)
    ]


class MessageOutline(NamedTuple):
    """A stored message without its content: what deciding a copy of it needs."""

    position: int
    role: str
    # Its metadata's "type" ("" for none): "compaction_warning", "compact", "forked", ...
    kind: str
    token_estimate: int
    # How many blocks its content has, and its tool_use / tool_result blocks as
    # (index in the content, type, the tool_use's "id" or the tool_result's "tool_use_id").
    blocks: int
    tool_blocks: list[tuple[int, str, Any]]


# A message's tool blocks and its block count, computed by the database: a message of megabytes
# is outlined in a few bytes, and its content never reaches Python.
_OUTLINE_SQL = {
    "postgresql": (
        "CASE WHEN jsonb_typeof({c}) = 'array' THEN (SELECT COALESCE(jsonb_agg(jsonb_build_array("
        "b.i - 1, b.v ->> 'type', CASE WHEN b.v ->> 'type' = 'tool_use' THEN b.v -> 'id' "
        "ELSE b.v -> 'tool_use_id' END) ORDER BY b.i), '[]'::jsonb) "
        "FROM jsonb_array_elements({c}) WITH ORDINALITY AS b(v, i) "
        "WHERE jsonb_typeof(b.v) = 'object' AND b.v ->> 'type' IN ('tool_use', 'tool_result')) "
        "ELSE '[]'::jsonb END",
        "CASE WHEN jsonb_typeof({c}) = 'array' THEN jsonb_array_length({c}) ELSE 0 END",
    ),
    "sqlite": (
        "CASE WHEN json_type({c}) = 'array' THEN (SELECT json_group_array(json_array("
        "b.key, json_extract(b.value, '$.type'), json_extract(b.value, CASE json_extract(b.value, "
        "'$.type') WHEN 'tool_use' THEN '$.id' ELSE '$.tool_use_id' END))) "
        "FROM json_each({c}) AS b "
        "WHERE b.type = 'object' AND json_extract(b.value, '$.type') IN ('tool_use', 'tool_result')) "
        "ELSE '[]' END",
        "CASE WHEN json_type({c}) = 'array' THEN json_array_length({c}) ELSE 0 END",
    ),
}


def message_outlines(*, session_id: uuid.UUID, epoch: int) -> list[MessageOutline]:
    """The epoch's messages in order, outlined (`MessageOutline`): what a fork decides its copy
    from without reading any message's content into Python."""
    tool_blocks_sql, blocks_sql = _OUTLINE_SQL[connection.vendor]
    column = content_sql(connection.ops.quote_name(Message._meta.db_table))
    rows = (
        Message.objects.filter(session_id=session_id, epoch=epoch)
        .annotate(
            outline_tool_blocks=RawSQL(tool_blocks_sql.format(c=column), (), output_field=JSONField()),
            outline_blocks=RawSQL(blocks_sql.format(c=column), (), output_field=IntegerField()),
        )
        .order_by("position")
        .values_list(
            "position", "role", "metadata", "token_estimate", "outline_blocks", "outline_tool_blocks"
        )
    )
    return [
        MessageOutline(
            position=position,
            role=role,
            kind=str((metadata or {}).get("type", "")) if isinstance(metadata, dict) else "",
            token_estimate=token_estimate,
            blocks=blocks or 0,
            tool_blocks=sorted((int(i), str(kind), ident) for i, kind, ident in tool_blocks or []),
        )
        for position, role, metadata, token_estimate, blocks, tool_blocks in rows
    ]


def tool_calls_answered(*, session_id: uuid.UUID, tool_use_ids: list[str]) -> dict[str, ToolCall]:
    """The client tool calls among `tool_use_ids` that have a result."""
    calls = ToolCall.objects.filter(session_id=session_id, tool_use_id__in=tool_use_ids, status="done")
    return {call.tool_use_id: call for call in calls}


def tool_call_approvals(*, session_id: uuid.UUID, tool_use_ids: list[str]) -> dict[str, tuple[str, str]]:
    """The approval state and reason of each of the session's calls `tool_use_ids`."""
    return {
        tool_use_id: (approval, reason)
        for tool_use_id, approval, reason in ToolCall.objects.filter(
            session_id=session_id, tool_use_id__in=tool_use_ids
        ).values_list("tool_use_id", "approval", "approval_reason")
    }


def request_canonical_bytes(body: dict) -> bytes:
    """A request's canonical JSON (compact, keys sorted), as the engine hashes and compares it."""
    return canonical_json(body)


def model_call_request(*, call: ModelCall) -> dict[str, Any]:
    """The exact request body of a recorded model call (runs of stored messages and the parts
    stored once put back). A part that is missing stays a reference: the body then does not
    match the record's hash (`model_call_request_verified`)."""
    record = call.request
    body = dict(record)
    named = {k: v["$part"] for k, v in record.items() if isinstance(v, dict) and set(v) == {"$part"}}
    if named:
        texts = dict(RequestPart.objects.filter(pk__in=set(named.values())).values_list("sha256", "text"))
        for key, digest in named.items():
            if digest in texts:
                body[key] = json.loads(texts[digest])
    items = record.get("messages", [])
    # The stored messages sent with blocks added or marked (a few a request), in one query.
    singles = {
        item[MESSAGE_KEY] for item in items if isinstance(item, dict) and type(item.get(MESSAGE_KEY)) is int
    }
    changed = {
        m.position: m
        for m in _with_content(
            Message.objects.filter(session_id=call.session_id, position__in=singles), "role", "position"
        )
    }
    messages: list[dict] = []
    for item in items:
        if isinstance(item, dict) and RUN_KEY in item:
            first, last = item[RUN_KEY]
            run = Message.objects.filter(
                session_id=call.session_id, position__gte=first, position__lte=last
            ).order_by("position")
            messages += [{"role": m.role, "content": resolved(m)} for m in _with_content(run, "role")]
        elif isinstance(item, dict) and MESSAGE_KEY in item:
            # A stored message that is gone leaves the body short: it no longer matches its hash.
            m = changed.get(item[MESSAGE_KEY])
            rebuilt = None if m is None else message_rebuilt(item, m.role, resolved(m))
            if rebuilt is not None:
                messages.append(rebuilt)
        else:
            messages.append(item)
    body["messages"] = messages
    return body


def request_sha256(body: dict) -> str:
    """The SHA-256 of a request body, whatever the order of its objects' keys: PostgreSQL's
    jsonb does not keep that order, so a hash of the bytes as sent could not be checked there."""
    return hashlib.sha256(canonical_json(body)).hexdigest()


def model_call_request_verified(*, call: ModelCall) -> bool:
    return request_sha256(model_call_request(call=call)) == call.request_sha256


def archive_latest(*, session_id: uuid.UUID) -> Archive | None:
    """The most recent archive of a session (the only one `session_archive_read` may read)."""
    return Archive.objects.filter(session_id=session_id).order_by("-epoch").first()


def _with_content(messages: QuerySet[Message], *fields: str) -> QuerySet[Message]:
    """`messages` with only `fields` and their resolved content (`message_content.resolved`)."""
    return messages_with_content(messages.only(*fields))


def archive_messages(*, archive: Archive) -> list[Message]:
    """The archive's messages in order, with position, role, metadata and their content
    (`message_content.resolved`)."""
    return list(
        _with_content(
            Message.objects.filter(session_id=archive.session_id, epoch=archive.epoch),
            "position",
            "role",
            "metadata",
        ).order_by("position")
    )


class TurnLease(NamedTuple):
    """The lease of a session's turn, as its row holds it."""

    turn_id: uuid.UUID
    expires_at: Any
    host: str
    pid: int | None
    cancel_requested: bool


def turn_lease(*, session_id: uuid.UUID) -> TurnLease | None:
    """The lease of the session's turn; None when no turn holds it (a cheap read, no lock)."""
    row = (
        AgentSession.objects.filter(pk=session_id, current_turn_id__isnull=False)
        .values_list("current_turn_id", "lease_expires_at", "lease_host", "lease_pid", "cancel_requested")
        .first()
    )
    if row is None:
        return None
    turn_id, expires_at, host, pid, cancel_requested = row
    assert turn_id is not None  # filtered on
    return TurnLease(turn_id, expires_at, host, pid, cancel_requested)


def lease_pids_on_host(*, host: str) -> set[int]:
    """The pids of the processes of `host` (`common.processes.process_host`) that hold a turn's
    lease. Only leased rows are looked at (the lease expiry index holds them alone)."""
    pids = (
        AgentSession.objects.filter(
            lease_expires_at__isnull=False, current_turn_id__isnull=False, lease_host=host
        )
        .values_list("lease_pid", flat=True)
        .distinct()
    )
    return {pid for pid in pids if pid is not None}


def sessions_leased_by(*, host: str, pids: set[int], limit: int) -> list[uuid.UUID]:
    """Sessions whose turn's lease is held by one of the processes `pids` of `host`, oldest
    expiry first."""
    return list(
        AgentSession.objects.filter(
            lease_expires_at__isnull=False, current_turn_id__isnull=False, lease_host=host, lease_pid__in=pids
        )
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )


def turn_calls_waiting(
    *, session_id: uuid.UUID, turn_id: uuid.UUID
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the turn waits for, in the order the calls were made (one query): its client tool
    calls without a result (`tool_use_id`, `name`, `input`), and its
    calls waiting for an approval (the same, and `input_sha256`)."""
    rows = (
        ToolCall.objects.filter(session_id=session_id, turn_id=turn_id, status=ToolCallStatus.PENDING)
        .filter(Q(executor=ToolExecutor.CLIENT) | Q(approval=APPROVAL_PENDING))
        .order_by("id")
        .values_list("tool_use_id", "name", "input", "executor", "approval")
    )
    client: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []
    for tool_use_id, name, tool_input, executor, approval in rows:
        call = {"tool_use_id": tool_use_id, "name": name, "input": tool_input}
        if executor == ToolExecutor.CLIENT:
            client.append(call)
        elif approval == APPROVAL_PENDING:
            asked.append({**call, "input_sha256": input_sha256(tool_input)})
    return client, asked


def sessions_past_retention(
    *, ended_before: datetime, limit: int, after: tuple[datetime, uuid.UUID] | None = None
) -> list[tuple[uuid.UUID, datetime]]:
    """Root sessions that ended before `ended_before`, longest ended first, with when they ended
    (retention's purge; a sub-session goes with its root). `after`: the (ended_at, id) of the last
    one a previous page gave."""
    rows = AgentSession.objects.filter(
        ended_at__lt=ended_before, parent_session__isnull=True, status=SessionStatus.ENDED
    )
    if after is not None:
        rows = rows.filter(Q(ended_at__gt=after[0]) | Q(ended_at=after[0], pk__gt=after[1]))
    page = rows.order_by("ended_at", "pk").values_list("pk", "ended_at")[:limit]
    return [(pk, ended) for pk, ended in page if ended is not None]


def session_tree_size(*, session_id: uuid.UUID) -> int:
    """How many sessions a root's tree holds, the root included."""
    return 1 + AgentSession.objects.filter(root_session_id=session_id).count()


def sessions_lease_expired(*, limit: int) -> list[uuid.UUID]:
    """Sessions whose turn's lease ran out (on the lease expiry index), oldest expiry first."""
    return list(
        AgentSession.objects.filter(lease_expires_at__lte=timezone.now(), current_turn_id__isnull=False)
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )


def approvals_pending_count() -> int:
    """The tool calls waiting for an approval across every session (their turn still runs and is
    not asked to cancel): the dashboard's badge and the `palimpsest_approvals_pending` gauge."""
    return ToolCall.objects.filter(
        approval=APPROVAL_PENDING,
        status=ToolCallStatus.PENDING,
        turn_id=F("session__current_turn_id"),
        session__cancel_requested=False,
    ).count()
