"""Turns: the lease that lets one turn at a time write a session's history, its start, its end,
cancels, the lock every turn write takes, and the repair of a turn whose process died.

A lease has a holder: a fresh id for each runner of a turn. The runner's task names it once
(`lease_hold`); every check below (`turn_lock`, the heartbeat, the cancel check, the end) then
compares it, so a process that stalled past its lease writes nothing once another process has
taken the same turn over. Code outside a runner (an operator's tool, a test) checks the turn only.

A lease also records the holder's process (its host and pid, `lease_taken`): a lease whose
process is known gone (`common.processes.process_gone`) has lapsed as if it had run out, so a
process on the same host takes a dead turn over at once instead of a lease later.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sessions_app.announce import announce_on_commit
from sessions_app.common import metrics
from sessions_app.common.processes import process_gone, process_host
from sessions_app.common.types import PlannedToolCall, StoredMessage
from sessions_app.fastpath.counters import session_update, session_update_if, session_update_if_read
from sessions_app.fastpath.rows import object_get, objects_insert, values_get
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import (
    AgentSession,
    AgentToken,
    Message,
    MessageRole,
    ModelCall,
    SessionEvent,
    SessionStatus,
    ToolCall,
    ToolCallStatus,
    ToolExecutor,
    Turn,
)
from sessions_app.services.events import event_emit, events_insert
from sessions_app.services.messages import dangling_tool_uses, message_insert, message_write

INTERRUPTED_TOOL_RESULT = "The turn that called this tool was interrupted before the tool answered."
# What the model reads for a server tool that was running when its process died, in a turn that
# another process takes over (the tool may have done its work; its result is lost).
SERVER_STOPPED_TOOL_RESULT = (
    "The server stopped while this tool was running: it may or may not have finished, and its "
    "result is lost. Check what it was meant to change before relying on it."
)
# The `error` event (and `Turn.error`) of a turn closed because its process died.
SERVER_STOPPED_CODE = "server_stopped"
SERVER_STOPPED_MESSAGE = (
    "The server process running this turn stopped; the turn was ended by another process. "
    "Nothing stored was lost: send your message again to go on."
)
COMPACTION_STOPPED_MESSAGE = "The compaction was interrupted: the server process running it stopped."

# (session id, holder) of the lease the running task holds; set by a runner at its start.
_LEASE: ContextVar[tuple[uuid.UUID, uuid.UUID] | None] = ContextVar("palimpsest_turn_lease", default=None)


# The session row's fields that hold a turn's lease, as a turn's end leaves them.
LEASE_RELEASED: dict[str, Any] = {
    "current_turn_id": None,
    "lease_expires_at": None,
    "lease_holder": None,
    "lease_host": "",
    "lease_pid": None,
    "cancel_requested": False,
}


def lease_taken(holder: uuid.UUID | None) -> dict[str, Any]:
    """The session row's fields that name a lease's holder: the runner's id and this process
    (host and pid), so that another process on the host can tell when it died."""
    return {"lease_holder": holder, "lease_host": process_host(), "lease_pid": os.getpid()}


class TurnInProgress(Exception):
    """The session already runs a turn (its lease has not run out)."""


class SessionEnded(Exception):
    """The session was ended (`session.end`): it takes no more messages."""


class TurnNeedsRepair(TurnInProgress):
    """The session's turn lost its process while it waited for a client's tool results: it is
    to be taken over (`turn_repair`), not ended, so a new turn cannot begin."""


class UnknownToolUse(Exception):
    """No tool call with that id is waiting for a result in this session."""


class ToolResultAlreadyGiven(Exception):
    """The tool call was answered already."""


class TokenRevoked(Exception):
    """The session's owner (an agent token) is revoked: its sessions run no more turns."""


class NoTurnInProgress(Exception):
    """There is no running turn to act on."""


class TurnLeaseLost(Exception):
    """The turn writing no longer holds its session's lease: nothing was written."""


def lease_hold(*, session_id: uuid.UUID, holder: uuid.UUID) -> None:
    """Name the lease the current task holds (a runner calls this first thing in its own task,
    so the value is the task's own: a child turn started from it names its own)."""
    _LEASE.set((session_id, holder))


def lease_holder_expected(session_id: uuid.UUID) -> uuid.UUID | None:
    """The lease holder a write of this task must find on the session's row (its own, where it
    holds the session's lease: `lease_hold`), or None when any holder of the turn will do."""
    held = _LEASE.get()
    return held[1] if held is not None and held[0] == session_id else None


def _lease_held(session_id: uuid.UUID, turn_id: uuid.UUID, current: Any, holder: Any) -> bool:
    """Whether the session's lease (`current` turn, `holder`) is this task's lease of `turn_id`."""
    if current != turn_id:
        return False
    expected = lease_holder_expected(session_id)
    return expected is None or expected == holder


def lease_held(session: AgentSession, turn_id: uuid.UUID) -> bool:
    """Whether `session` (a row read under its lock) is leased to this task's `turn_id`."""
    return _lease_held(session.pk, turn_id, session.current_turn_id, session.lease_holder)


# What a turn's writes read from the session row they lock (the rest is deferred: its settings,
# tools and notepad are not decoded for every write).
TURN_LOCK_FIELDS = ("id", "current_turn_id", "lease_holder", "cancel_requested", "token_ratio")


def turn_lock(session_id: uuid.UUID, turn_id: uuid.UUID) -> AgentSession:
    """Lock the session row for a write of `turn_id`; `TurnLeaseLost` if another turn holds it.

    Every write a turn makes goes through this inside its transaction, so a turn that lost its
    lease (its process stalled past the expiry and another turn began) cannot write into the
    history the new turn now owns. The session row is always the first lock a turn write takes.
    """
    session = object_get(AgentSession, session_id, lock=True, only=TURN_LOCK_FIELDS)
    if not _lease_held(session_id, turn_id, session.current_turn_id, session.lease_holder):
        raise TurnLeaseLost
    return session


def lease_until() -> Any:
    return timezone.now() + timedelta(seconds=django_settings.PALIMPSEST_TURN_LEASE_SECONDS)


def lease_lapsed(
    *, current_turn_id: uuid.UUID | None, expires_at: Any, host: str, pid: int | None, now: Any
) -> bool:
    """Whether a turn holds the lease and the lease no longer protects it: it ran out, or the
    process holding it is known gone (same host, its pid gone: `process_gone`)."""
    if not current_turn_id:
        return False
    return expires_at is None or expires_at <= now or process_gone(host=host, pid=pid)


def _lease_expired(session: AgentSession, now: Any) -> bool:
    """`lease_lapsed` for a session row (read with the lease's fields)."""
    return lease_lapsed(
        current_turn_id=session.current_turn_id,
        expires_at=session.lease_expires_at,
        host=session.lease_host,
        pid=session.lease_pid,
        now=now,
    )


def lease_takeover_at(*, expires_at: Any, host: str, pid: int | None, now: Any) -> Any:
    """When a live process will take over a turn whose holder is dead or presumed dead: `now`
    when the holder is known gone (same host, its pid gone); the lease's expiry when the holder
    has missed a renewal by more than a sixth of the lease (it renews every third, so a live
    holder's lease always has more than two thirds left, less the renewal's own delay); None
    while the holder keeps its lease (it may be alive: nothing will take its turn over)."""
    if process_gone(host=host, pid=pid):
        return now
    lease = timedelta(seconds=django_settings.PALIMPSEST_TURN_LEASE_SECONDS)
    if expires_at is None or expires_at - now < lease / 2:
        return max(expires_at or now, now)
    return None


# What a new turn's start reads of the session row it locks: the engine's snapshot (the request's
# settings, the notepad), the lease and the status. The rest (usage totals, counters, times,
# title, owner) is left deferred: decoding all 36 columns into a model costs about as much as the
# read itself. A deferred field still loads if something asks for it.
LOCKED_FIELDS = (
    "id",
    "model",
    "system_prompt",
    "context_window",
    "compact_threshold",
    "settings",
    "client_tools",
    "epoch",
    "last_prompt_tokens",
    "last_estimated_tokens",
    "token_ratio",
    "compaction_failures",
    "depth",
    "owner_id",
    "parent_session_id",
    "root_session_id",
    "notepad",
    # What the context sections pinned for the epoch: the turn's first request shows it.
    "context_pins",
    "status",
    "ended_at",
    "agent_id",
    "current_turn_id",
    "lease_expires_at",
    "lease_holder",
    "lease_host",
    "lease_pid",
    "cancel_requested",
)


def lease_lock_free(session_id: uuid.UUID) -> AgentSession:
    """Lock the session row (inside the caller's transaction) for a new holder of its lease:
    `TurnInProgress` while a turn holds an unexpired lease, `TurnNeedsRepair` while a dead turn
    still waits for a client's tool results (it is taken over by `turn_repair`, not ended); any
    other turn whose lease lapsed (its process died: `lease_lapsed`) is closed first, announced
    as `turn_repair` does."""
    session = object_get(AgentSession, session_id, lock=True, only=LOCKED_FIELDS)
    if session.status == SessionStatus.ENDED or session.ended_at is not None:
        raise SessionEnded
    now = timezone.now()
    if session.current_turn_id and not _lease_expired(session, now):
        raise TurnInProgress
    if session.current_turn_id:
        if _resumable_calls(session):
            raise TurnNeedsRepair
        _dead_turn_close(session, now)
        session.refresh_from_db()
    return session


# ---------------------------------------------------------------------------
# The repair of a turn whose process died
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnRepair:
    """What `turn_repair` did with a dead turn: `resumed` (the caller now holds its lease and
    runs it on: `calls` are its last step's tool calls, in the model's order, and `steps` the
    model steps it had made) or closed."""

    turn_id: uuid.UUID
    resumed: bool
    calls: list[PlannedToolCall] = field(default_factory=list)
    steps: int = 0
    # The step's server calls had not begun (it waited for approvals): they run on the new
    # process, their answers read from their rows. Else they are answered as stopped.
    rerun_server: bool = False


def _dangling_blocks(session: AgentSession) -> list[dict]:
    """The `tool_use` blocks of the epoch's last message when it is an assistant step whose
    results were never stored."""
    qs = Message.objects.filter(session=session, epoch=session.epoch).order_by("-position")
    last = messages_with_content(qs).first()
    if last is None or last.role != MessageRole.ASSISTANT:
        return []
    return [b for b in resolved(last) if isinstance(b, dict) and b.get("type") == "tool_use"]


def _resumable_calls(session: AgentSession) -> list[PlannedToolCall]:
    """The dead turn's last step's calls when some are a client's (each stays answerable) or the
    step waited for approvals and its server calls had not begun (`_approvals_unstarted`): the
    turn is taken over rather than ended. Empty when the turn was asked to cancel."""
    return _resumable(session)[0]


def _resumable(session: AgentSession) -> tuple[list[PlannedToolCall], bool]:
    """`_resumable_calls`, and whether the step's server calls are to run on the process that
    takes the turn over (it waited for approvals and none had begun). A stored call keeps its
    stored input (what the hooks made of the model's: the one an approval binds)."""
    dead = session.current_turn_id
    if session.cancel_requested or dead is None:
        return [], False
    blocks = _dangling_blocks(session)
    rows = {
        tool_use_id: (executor, tool_input, approval, started_at)
        for tool_use_id, executor, tool_input, approval, started_at in ToolCall.objects.filter(
            session=session, turn_id=dead, tool_use_id__in=[b["id"] for b in blocks]
        ).values_list("tool_use_id", "executor", "input", "approval", "started_at")
    }
    rerun = _approvals_unstarted(rows)
    if not rerun and not any(r[0] == ToolExecutor.CLIENT for r in rows.values()):
        return [], False
    planned = []
    for b in blocks:
        executor, tool_input, approval, _ = rows.get(b["id"], (ToolExecutor.SERVER, None, "", None))
        planned.append(
            PlannedToolCall(
                b["id"],
                b["name"],
                tool_input if tool_input is not None else (b.get("input") or {}),
                executor,
                approval,
            )
        )
    return planned, rerun


def _approvals_unstarted(rows: dict[str, tuple]) -> bool:
    """Whether a step's calls (tool_use_id -> executor, input, approval, started_at) waited for an
    approval and none of its server calls had begun: nothing of it ran, it may run elsewhere."""
    return any(r[2] for r in rows.values()) and all(r[3] is None for r in rows.values())


def _interrupted_results_write(session: AgentSession, turn_id: uuid.UUID | None) -> None:
    """An error result for each tool call of the history left unanswered by a turn that stopped,
    so that the next request is valid for the API. A session whose last turn ended as it should
    (idle, no lease) has none: every path that ends a turn so stores each call's result (an error
    or a cancel's, at worst), so its history is not searched."""
    if session.status == SessionStatus.IDLE and session.current_turn_id is None:
        return
    _interrupted_results_store(session, turn_id)


def _interrupted_results_store(session: AgentSession, turn_id: uuid.UUID | None) -> None:
    """An error result for each call of the epoch's last step that has none (one user message)."""
    dangling = dangling_tool_uses(session)
    if not dangling:
        return
    message_write(
        session_id=session.pk,
        epoch=session.epoch,
        role=MessageRole.USER,
        content=[
            {
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": INTERRUPTED_TOOL_RESULT,
                "is_error": True,
            }
            for tool_use_id in dangling
        ],
        turn_id=turn_id,
        metadata={"repair": "interrupted_turn"},
    )


def _dead_turn_close(session: AgentSession, now: Any) -> None:
    """End the session's dead turn inside the caller's transaction (the row is locked): its
    unanswered calls get an error result (the history stays valid for the API), the turn ends
    (`cancelled` if a cancel was asked, else `error` with a `server_stopped` event), the lease is
    released, the status is idle, and everything is announced after commit. An operator's
    compaction (a lease with no user message) ends with `compaction_failed` instead."""
    dead = session.current_turn_id
    assert dead is not None
    # A turn's first message is its user's; an operator's compaction writes only its summary.
    first = Message.objects.filter(turn_id=dead).order_by("position").values_list("metadata", flat=True)[:1]
    is_turn = any((metadata or {}).get("type") != "compact" for metadata in first)
    _interrupted_results_write(session, dead)
    ToolCall.objects.filter(session=session, turn_id=dead, status=ToolCallStatus.PENDING).update(
        status=ToolCallStatus.DONE, result=INTERRUPTED_TOOL_RESULT, is_error=True, completed_at=now
    )
    stop_reason = "cancelled" if session.cancel_requested and is_turn else "error"
    Turn.objects.filter(pk=dead, ended_at__isnull=True).update(
        ended_at=now, stop_reason=stop_reason, error=SERVER_STOPPED_MESSAGE
    )
    AgentSession.objects.filter(pk=session.pk).update(
        **LEASE_RELEASED,
        # The session is sound: only the process that ran the turn stopped.
        status=SessionStatus.IDLE,
        last_activity_at=now,
    )
    if not is_turn:
        event_emit(
            session_id=session.pk,
            type="error",
            payload={"code": "compaction_failed", "message": COMPACTION_STOPPED_MESSAGE},
        )
        event_emit(session_id=session.pk, type="session.status", payload={"status": SessionStatus.IDLE})
        return
    if stop_reason == "error":
        event_emit(
            session_id=session.pk,
            type="error",
            payload={"code": SERVER_STOPPED_CODE, "message": SERVER_STOPPED_MESSAGE},
        )
    event_emit(
        session_id=session.pk,
        type="turn.completed",
        payload={"turn_id": str(dead), "stop_reason": stop_reason},
    )
    transaction.on_commit(lambda: metrics.turn_ended(stop_reason=stop_reason))


IMPORTED_STOPPED_MESSAGE = (
    "The session was exported while this turn ran; the imported copy does not run it on."
)


def imported_turns_close(*, session_id: uuid.UUID) -> list[uuid.UUID]:
    """End the turns of an imported session that the export caught running, inside the import's
    transaction (the copy is idle, with no lease): the last step's unanswered calls get an error
    result (so the next request is valid for the API), their rows and any call that waited for an
    approval are done with that error, and each turn ends with `error`, announced in the copy's
    events as a dead turn's end is. Returns the turns ended."""
    open_turns = list(
        Turn.objects.filter(session_id=session_id, ended_at__isnull=True)
        .order_by("started_at")
        .values_list("pk", flat=True)
    )
    if not open_turns:
        return []
    session = AgentSession.objects.get(pk=session_id)
    now = timezone.now()
    _interrupted_results_store(session, open_turns[-1])
    ToolCall.objects.filter(
        session_id=session_id, turn_id__in=open_turns, status=ToolCallStatus.PENDING
    ).update(status=ToolCallStatus.DONE, result=INTERRUPTED_TOOL_RESULT, is_error=True, completed_at=now)
    Turn.objects.filter(pk__in=open_turns).update(
        ended_at=now, stop_reason="error", error=IMPORTED_STOPPED_MESSAGE
    )
    for turn_id in open_turns:
        event_emit(
            session_id=session_id,
            type="turn.completed",
            payload={"turn_id": str(turn_id), "stop_reason": "error"},
        )
    return open_turns


def turn_repair(
    *, session_id: uuid.UUID, holder: uuid.UUID, alive: Callable[[uuid.UUID], bool] | None = None
) -> TurnRepair | None:
    """Repair the session's turn if its lease lapsed (it ran out, or its process is known gone:
    `lease_lapsed`); None if there is nothing to repair (no turn, a live lease, or another
    process repaired it first).

    `alive(turn_id)`: whether the caller's own process runs that turn. Such a turn's process did
    not die (its event loop stalled past the lease, its renewal late): its lease is renewed for
    its own holder, and None is returned.

    A turn whose last step waits for a client's tool results is taken over: the lease is renewed
    for `holder` and the caller must run the turn on (`TurnRepair.resumed`); a result the client
    sent meanwhile, to any process, is kept and used. Any other dead turn is closed
    (`_dead_turn_close`). Two processes repairing at once: the session's row lock (an IMMEDIATE
    transaction on SQLite) lets one in; the other then finds a live lease or no turn.
    """
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        now = timezone.now()
        if not _lease_expired(session, now):
            return None
        dead = session.current_turn_id
        assert dead is not None
        if alive is not None and alive(dead):
            AgentSession.objects.filter(pk=session_id, current_turn_id=dead).update(
                lease_expires_at=lease_until()
            )
            return None
        calls, rerun = _resumable(session)
        if not calls:
            _dead_turn_close(session, now)
            return TurnRepair(turn_id=dead, resumed=False)
        AgentSession.objects.filter(pk=session_id, current_turn_id=dead).update(
            lease_expires_at=lease_until(), **lease_taken(holder), status=SessionStatus.RUNNING
        )
        steps = ModelCall.objects.filter(turn_id=dead, purpose="turn").aggregate(n=Max("step"))["n"] or 0
    return TurnRepair(turn_id=dead, resumed=True, calls=calls, steps=steps, rerun_server=rerun)


def _owner_active_check(session: AgentSession) -> None:
    """`TokenRevoked` when the session (its row locked by the caller's transaction) belongs to a
    revoked token and its client has no other token (sessions are owned by the client, known by
    its token's name: a rotated token of the same name goes on with them). One read of the
    token's row, for the sessions of agent clients only; a second only when it is revoked."""
    if session.owner_id is None:
        return
    revoked_at, name = values_get(AgentToken, session.owner_id, ("revoked_at", "name"))
    if revoked_at is not None and not AgentToken.objects.filter(name=name, revoked_at__isnull=True).exists():
        raise TokenRevoked


def turns_cancel_for_owners(*, owner_ids: list[int]) -> list[uuid.UUID]:
    """Ask the running turn of every session the tokens `owner_ids` own to stop, as a
    `turn.cancel` does (`cancel_requested`, which the turn's runner reads before each model call
    and which the poll of every process's waiting turns reads each round: `turns_stop_asked`);
    a sub-session is owned by its root's token, so children are asked too. A turn whose process
    died is then closed as cancelled by its repair. Returns the sessions asked.

    Called in the transaction that revokes the tokens. Every session row of theirs is locked
    first (in id order, as other multi-session writes lock them), so a turn cannot begin unseen
    meanwhile: a `turn_begin` that locked a row first has committed its turn before the update
    below reads it (and asks it to stop), and one that comes after waits for this transaction
    and then finds the token revoked (`TokenRevoked`)."""
    owned = AgentSession.objects.filter(owner_id__in=owner_ids)
    list(owned.select_for_update().order_by("pk").values_list("pk", flat=True))
    running = list(owned.filter(current_turn_id__isnull=False).values_list("pk", flat=True))
    if running:
        owned.filter(current_turn_id__isnull=False).update(cancel_requested=True)
    return running


def turn_begin(
    *,
    session_id: uuid.UUID,
    content: str,
    request_id: Any = None,
    token_estimate: int | None = None,
    holder: uuid.UUID | None = None,
    turn_id: uuid.UUID | None = None,
    admit: Callable[[AgentSession], None] | None = None,
    stored: Callable[[StoredMessage], None] | None = None,
) -> Turn:
    """Take the session's turn lease, store the user's message and announce the turn.

    `token_estimate` is the message's estimate when the caller counted it already (the engine
    counts off Django's shared database thread, where a huge text would stall every session).
    `holder` names the runner that will hold the lease (`lease_hold`); `turn_id` the new turn,
    when the caller chose it. `admit` is called with the locked session row before the turn's
    writes (in the usual start, just after the row's update, which a refusal rolls back with
    the rest): it raises to refuse the message (the engine's check that it fits the window), so
    the check and the start are one transaction and one read of the row. `stored` is called with
    the user's message as inserted (as the engine's history holds it), inside the transaction.

    Raises `TokenRevoked` when the session's owner token is revoked (no turn of a revoked
    token's sessions begins: `turns_cancel_for_owners` says why this cannot race a revocation).
    Raises `TurnInProgress` while another turn holds an unexpired lease (`TurnNeedsRepair` when
    that turn's process died while it waited for a client). A history left with unanswered tool
    calls by a crashed turn is repaired first (each gets an error result), so the next request is
    valid.

    An idle session with no turn (the usual start) is taken in one statement: its row is updated
    while it is so, and read back from that update (`LOCKED_FIELDS`, as they are after it). Any
    other row (a turn holds the lease, or held it and died; the last turn failed) is read and
    locked first, then updated.
    """
    turn = Turn(id=turn_id or uuid.uuid4(), session_id=session_id)
    started: dict[str, Any] = {"turn_id": str(turn.id)}
    if request_id is not None:
        started["request_id"] = request_id
    events: list[tuple[str, dict[str, Any]]] = [
        ("user.message", {"turn_id": str(turn.id), "content": content}),
        ("turn.started", started),
    ]
    # The lease, the message's position and the events' seqs: one update of the row.
    add = {"next_position": 1, "last_seq": len(events)}
    assign = {
        "current_turn_id": turn.id,
        "lease_expires_at": lease_until(),
        **lease_taken(holder),
        "cancel_requested": False,
        "status": SessionStatus.RUNNING,
        # A new turn resets the compaction breaker (DESIGN.md).
        "compaction_failures": 0,
        "last_activity_at": timezone.now(),
    }
    with transaction.atomic():
        taken = session_update_if_read(
            session_id,
            # An idle session being ended (`ended_at`) takes the slow path, which refuses it.
            where={"current_turn_id": None, "status": SessionStatus.IDLE, "ended_at": None},
            add=add,
            assign=assign,
            read=LOCKED_FIELDS,
        )
        if taken is not None:
            session, counters = taken
            _owner_active_check(session)  # a refusal rolls the update back
            if admit is not None:
                admit(session)
        else:
            session = lease_lock_free(session_id)
            _owner_active_check(session)
            if admit is not None:
                admit(session)
            _interrupted_results_write(session, session.current_turn_id)
            counters = session_update(session.pk, add=add, assign=assign)
        objects_insert([turn])
        message = message_insert(
            session_id=session.pk,
            position=counters["next_position"] - 1,
            epoch=session.epoch,
            role=MessageRole.USER,
            content=[{"type": "text", "text": content}],
            turn_id=turn.id,
            token_estimate=token_estimate,
        )
        events_insert(session_id=session.pk, last_seq=counters["last_seq"], events=events)
        if stored is not None:
            stored(message)
    return turn


def turn_heartbeat(*, session_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Extend the lease; False when this task no longer holds it (another process took the turn
    over or closed it after the lease ran out). A turn whose session's owner token is revoked is
    asked to stop (`cancel_requested`), as a cancel asks it."""
    held = _LEASE.get()
    rows = AgentSession.objects.filter(pk=session_id, current_turn_id=turn_id)
    if held is not None and held[0] == session_id:
        rows = rows.filter(lease_holder=held[1])
    renewed = bool(rows.update(lease_expires_at=lease_until()))
    if renewed:
        # A turn of a revoked token's session is asked to stop here too, however the token was
        # revoked (a revocation asks its turns at once: `turns_cancel_for_owners`).
        rows.filter(cancel_requested=False, owner__revoked_at__isnull=False).update(cancel_requested=True)
    return renewed


def turn_finish(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    stop_reason: str,
    steps: int,
    error: str = "",
    extra: dict | None = None,
) -> None:
    """Release the lease and announce `turn.completed`. A turn that no longer holds its lease
    writes nothing: whoever took the lease (a new turn, or a process that repaired this one)
    ended it or runs it on."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if not _lease_held(session_id, turn_id, session.current_turn_id, session.lease_holder):
            return
        event_emit(
            session_id=session_id,
            type="turn.completed",
            payload=turn_close(
                session_id=session_id,
                turn_id=turn_id,
                stop_reason=stop_reason,
                steps=steps,
                error=error,
                extra=extra,
            ),
        )


def turn_close(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    stop_reason: str,
    steps: int,
    error: str = "",
    extra: dict | None = None,
) -> dict[str, Any]:
    """End the turn and release the lease, inside the caller's transaction, which holds the
    session's row lock and checked the lease; returns the `turn.completed` payload for the
    caller to emit with its own events."""
    now = timezone.now()
    Turn.objects.filter(pk=turn_id).update(ended_at=now, stop_reason=stop_reason, steps=steps, error=error)
    transaction.on_commit(lambda: metrics.turn_ended(stop_reason=stop_reason))
    AgentSession.objects.filter(pk=session_id, current_turn_id=turn_id).update(
        **LEASE_RELEASED,
        status=SessionStatus.ERROR if stop_reason == "error" else SessionStatus.IDLE,
        last_activity_at=now,
    )
    payload: dict[str, Any] = {"turn_id": str(turn_id), "stop_reason": stop_reason}
    payload.update(extra or {})
    return payload


def turn_cancel_request(*, session_id: uuid.UUID) -> uuid.UUID:
    """Ask the running turn to stop; returns its id. Raises `NoTurnInProgress`."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        if (
            not session.current_turn_id
            or not session.lease_expires_at
            or session.lease_expires_at <= timezone.now()
        ):
            raise NoTurnInProgress
        AgentSession.objects.filter(pk=session_id).update(cancel_requested=True)
        return session.current_turn_id


def turn_is_cancelled(*, session_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    """Whether a cancel was asked for this turn. Raises `TurnLeaseLost` if another turn holds the
    session (that is not a cancel: the lost turn must write nothing, not "cancelled" results)."""
    current, holder, cancel = values_get(
        AgentSession, session_id, ("current_turn_id", "lease_holder", "cancel_requested")
    )
    if not _lease_held(session_id, turn_id, current, holder):
        raise TurnLeaseLost
    return bool(cancel)


# At most this many sessions per query of `turns_stop_asked` (SQLite's bound variables).
STOP_ASKED_CHUNK = 500


def turns_stop_asked(
    *, turns: list[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]
) -> set[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]:
    """Of the running turns `turns` (session id, turn id, lease holder), those that must look
    again: a cancel was asked, or the session's lease is no longer that turn's and holder's (or
    the session is gone). Two runners of one session (one stalled, one that took its turn over)
    are told apart by their holders. One query per STOP_ASKED_CHUNK sessions, whatever the number
    of turns: the poll of a process's running turns for what another process wrote."""
    ids = list({session_id for session_id, _, _ in turns})
    found: dict[uuid.UUID, tuple[Any, Any, bool]] = {}
    for start in range(0, len(ids), STOP_ASKED_CHUNK):
        rows = AgentSession.objects.filter(pk__in=ids[start : start + STOP_ASKED_CHUNK]).values_list(
            "id", "current_turn_id", "lease_holder", "cancel_requested"
        )
        found.update({row[0]: row[1:] for row in rows})
    asked = set()
    for session_id, turn_id, holder in turns:
        row = found.get(session_id)
        if row is None or row[2] or row[0] != turn_id or row[1] != holder:
            asked.add((session_id, turn_id, holder))
    return asked


def turn_deltas_emit(*, deltas: list[tuple[uuid.UUID, uuid.UUID, uuid.UUID, str]]) -> list[bool]:
    """Announce the streamed text of many turns in one transaction: the process's deltas written
    together (`engine.deltas`), one transaction for all the sessions streaming at once instead
    of one each. Each of `deltas` is (session id, turn id, the lease's holder, text); returns in
    the same order whether each was written: False when that turn no longer holds its lease (its
    holder's), or the session is gone, and nothing of it was written.

    The session rows are locked in the order of their ids (two processes' batches cannot wait
    on each other). Each row's lock, the check of its lease and its seq's allocation are one
    statement (`session_update_if`): the lock is the one every turn write takes first
    (`turn_lock`), and a delta writes nothing else in the row."""
    order = sorted(range(len(deltas)), key=lambda i: str(deltas[i][0]))
    written = [False] * len(deltas)
    rows: list[SessionEvent] = []
    with transaction.atomic():
        for i in order:
            session_id, turn_id, holder, text = deltas[i]
            counters = session_update_if(
                session_id,
                where={"current_turn_id": turn_id, "lease_holder": holder},
                add={"last_seq": 1},
            )
            if counters is None:  # the turn no longer holds the lease, or the session is gone
                continue
            last_seq = counters["last_seq"]
            rows.append(
                SessionEvent(
                    session_id=session_id, seq=last_seq, type="assistant.delta", payload={"text": text}
                )
            )
            written[i] = True
        if rows:
            objects_insert(rows)
            announce_on_commit(*(row.as_frame() for row in rows))
    return written


def turn_error_emit(*, session_id: uuid.UUID, code: str, message: str) -> None:
    event_emit(session_id=session_id, type="error", payload={"code": code, "message": message})
