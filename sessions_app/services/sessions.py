"""Storing new sessions, changing their fields and status, deleting them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from sessions_app.models import AgentSession, AgentToken, Message, SessionStatus
from sessions_app.services.events import event_emit
from sessions_app.services.messages import messages_content_keep
from sessions_app.services.turns import TurnInProgress

# The period of `PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE`.
SESSIONS_QUOTA_PERIOD_SECONDS = 60


class SessionQuotaExceeded(Exception):
    """The token has created `limit` sessions in the last minute already."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(f"too many sessions: at most {limit} a minute per token")
        self.limit = limit


def agent_token_lock(*, owner_id: int | None) -> None:
    """Lock the token's row until the transaction ends (nothing for None): what a token creates
    is counted one creation after another. Take it before any session's row: a transaction that
    creates a session locks the token's row at its commit too (PostgreSQL's deferred foreign key
    check), so a session's row taken first could deadlock with it."""
    if owner_id is not None:
        AgentToken.objects.select_for_update().filter(pk=owner_id).values_list("pk", flat=True).first()


def session_quota_check(*, owner_id: int | None) -> None:
    """Raise `SessionQuotaExceeded` where the token `owner_id` has created
    `PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE` sessions (roots and sub-sessions alike) in the last
    SESSIONS_QUOTA_PERIOD_SECONDS; 0 switches the quota off, and a session no token owns (an
    operator's) is not counted.

    Call it inside the transaction that creates the session: it locks the token's row first
    (whatever the quota), so concurrent creations of one token, in any process, are counted one
    after another until that transaction ends (on SQLite the write transaction itself serializes
    them). The count is the database's, so the quota is
    the same in every server process."""
    if owner_id is None:
        return
    # Locked even with the quota off: the sub-sessions' per-client count relies on it.
    agent_token_lock(owner_id=owner_id)
    limit = django_settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE
    if limit <= 0:
        return
    since = timezone.now() - timedelta(seconds=SESSIONS_QUOTA_PERIOD_SECONDS)
    if AgentSession.objects.filter(owner_id=owner_id, created_at__gt=since).count() >= limit:
        raise SessionQuotaExceeded(limit=limit)


def session_insert(
    *,
    owner: AgentToken | None,
    model: str,
    context_window: int,
    title: str = "",
    system_prompt: str = "",
    compact_threshold: float,
    settings: dict[str, Any],
    client_tools: list[dict],
    agent_id: int | None = None,
) -> AgentSession:
    """Store a new session from values already checked (`engine.sessions.session_create` checks
    them against the features' settings and the model's window). Raises `SessionQuotaExceeded`
    (nothing stored) where its token is over its sessions-per-minute quota."""
    with transaction.atomic():
        session_quota_check(owner_id=owner.pk if owner is not None else None)
        return AgentSession.objects.create(
            owner=owner,
            title=title,
            model=model,
            system_prompt=system_prompt,
            context_window=context_window,
            compact_threshold=compact_threshold,
            settings=settings,
            client_tools=client_tools,
            agent_id=agent_id,
        )


def session_status_set(*, session_id: uuid.UUID, status: str) -> None:
    """Set the session's status and announce it (`session.status`, an addition to PROTOCOL.md:
    turn events already tell running/idle/error; this tells what no other event does, e.g.
    `compacting`)."""
    with transaction.atomic():
        AgentSession.objects.filter(pk=session_id).update(status=status)
        event_emit(session_id=session_id, type="session.status", payload={"status": status})


def session_context_pins_store(
    *,
    session_id: uuid.UUID,
    epoch: int,
    sections: dict[str, list[str]] | None = None,
    anchors: list[list[Any]] | None = None,
) -> None:
    """Store what the context sections pinned for `epoch` (`sections`) and the changes anchored
    in its history (`anchors`, `ContextAnchor.stored()` of each) in `AgentSession.context_pins`,
    while the session is still in that epoch; what is not given is kept when it is that epoch's.
    No event: what the model is shown is recorded with each call."""
    with transaction.atomic():
        row = AgentSession.objects.select_for_update().filter(pk=session_id, epoch=epoch).first()
        if row is None:
            return
        stored = row.context_pins if isinstance(row.context_pins, dict) else {}
        pins: dict[str, Any] = dict(stored) if stored.get("epoch") == epoch else {"epoch": epoch}
        if sections is not None:
            pins["sections"] = sections
        if anchors is not None:
            pins["anchors"] = anchors
        row.context_pins = pins
        row.save(update_fields=["context_pins"])


def session_context_anchors_remove(*, session_id: uuid.UUID, epoch: int, anchors: list[list[Any]]) -> None:
    """Take `anchors` (as stored) out of the changes anchored in `epoch`'s history, while the
    session is still in that epoch; the others stay, those anchored since included."""
    with transaction.atomic():
        row = AgentSession.objects.select_for_update().filter(pk=session_id, epoch=epoch).first()
        if row is None or not isinstance(row.context_pins, dict) or row.context_pins.get("epoch") != epoch:
            return
        kept = [a for a in row.context_pins.get("anchors") or [] if a not in anchors]
        row.context_pins = {**row.context_pins, "anchors": kept}
        row.save(update_fields=["context_pins"])


# The fields of a session a client or operator may change after creating it (PROTOCOL.md v1.2's
# `session.update`); `session_settings_update` writes no other.
SESSION_UPDATABLE_FIELDS = ("title", "context_window", "compact_threshold", "settings")


def session_settings_update(*, session_id: uuid.UUID, changes: dict[str, Any]) -> AgentSession:
    """Write `changes` (values already checked by `engine.sessions.session_update`; `settings`
    the full merged object) to the session and announce the fields that changed, in one
    transaction. Returns the session as stored.

    Rules:
    - only `SESSION_UPDATABLE_FIELDS`; any other key is a programming error (`ValueError`);
    - a value equal to the stored one is no change: nothing changed, nothing written or announced;
    - the event `session.updated` (an addition to PROTOCOL.md: no v1 event tells a session's
      fields) carries the changed fields with their new values;
    - a running turn reads the row at its next model call, so the change applies from there.
    `AgentSession.DoesNotExist` when there is no such session."""
    unknown = sorted(set(changes) - set(SESSION_UPDATABLE_FIELDS))
    if unknown:
        raise ValueError(f"session_settings_update cannot change {unknown[0]}")
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        changed = {name: value for name, value in changes.items() if getattr(session, name) != value}
        if not changed:
            return session
        AgentSession.objects.filter(pk=session_id).update(**changed)
        event_emit(session_id=session_id, type="session.updated", payload=dict(changed))
    return AgentSession.objects.get(pk=session_id)


def session_tree_delete(
    *, session_id: uuid.UUID, before_delete: Callable[[list[uuid.UUID]], None] | None = None
) -> list[uuid.UUID]:
    """Delete the session and every sub-session below it, with all they hold (the cascade of
    their foreign keys). Returns the deleted sessions' ids, the session's first.

    Rules:
    - refused (`TurnInProgress`) while any session of the subtree runs a turn, an operator's
      compaction included (a lease that has not run out): the turn would go on writing into rows
      that are gone. A turn whose process died (its lease ran out) does not stop the deletion;
    - the rows of the subtree are locked first (a turn cannot begin meanwhile), then
      `before_delete(ids)` runs (the features' `FeatureLifecycle.delete`), then each message
      content the subtree holds that other sessions' messages share (forks outside it) goes to
      them (`messages_content_keep`), then the rows go, in one transaction: a failure anywhere
      deletes nothing;
    - no event is written or announced: there is no session left to hold it.
    `AgentSession.DoesNotExist` when there is no such session."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        tree = list(
            AgentSession.objects.select_for_update()
            .filter(root_session_id=session.root_id)
            .only("id", "parent_session_id", "current_turn_id", "lease_expires_at")
        )
        ids = [session.pk, *_below(session.pk, tree)]
        now = timezone.now()
        leased = {s.pk: s for s in tree} | {session.pk: session}
        for sid in ids:
            row = leased[sid]
            if row.current_turn_id and row.lease_expires_at is not None and row.lease_expires_at > now:
                raise TurnInProgress
        if before_delete is not None:
            before_delete(ids)
        messages_content_keep(messages=Message.objects.filter(session_id__in=ids))
        AgentSession.objects.filter(pk__in=ids).delete()
    return ids


def _below(session_id: uuid.UUID, tree: list[AgentSession]) -> list[uuid.UUID]:
    """The ids of the sessions of `tree` below `session_id`, level by level."""
    below: list[uuid.UUID] = []
    wanted = {session_id}
    changed = True
    while changed:
        changed = False
        for row in tree:
            if row.parent_session_id in wanted and row.pk not in wanted:
                wanted.add(row.pk)
                below.append(row.pk)
                changed = True
    return below


# ---------------------------------------------------------------------------
# Ending a session (PROTOCOL.md v1.2 `session.end`)
# ---------------------------------------------------------------------------
def session_end_request(*, session_id: uuid.UUID) -> list[uuid.UUID]:
    """Begin ending the session and every sub-session below it: each is marked (`ended_at`), so
    that no turn begins in it from now on (`turn_begin` refuses: `SessionEnded`), and a running
    turn is asked to stop, as `turn.cancel` does. Returns the subtree's ids, the session's first
    (`session_end_finish` ends them once no turn runs). `AgentSession.DoesNotExist` when there is
    no such session."""
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=session_id)
        tree = list(
            AgentSession.objects.select_for_update()
            .filter(root_session_id=session.root_id)
            .only("id", "parent_session_id")
        )
        ids = [session.pk, *_below(session.pk, tree)]
        rows = AgentSession.objects.filter(pk__in=ids)
        rows.filter(ended_at__isnull=True).update(ended_at=timezone.now())
        rows.filter(current_turn_id__isnull=False).update(cancel_requested=True)
    return ids


def session_end_finish(*, session_ids: list[uuid.UUID], reason: str) -> list[uuid.UUID]:
    """End each of `session_ids` that runs no turn and is not ended yet (children first, as
    given reversed): its status becomes `ended` and `session.ended` (`reason`: `client` or
    `operator`) is announced. Returns the sessions ended now; one whose turn still runs is left
    to a later call."""
    ended: list[uuid.UUID] = []
    for session_id in reversed(session_ids):
        with transaction.atomic():
            session = (
                AgentSession.objects.select_for_update()
                .only("id", "status", "current_turn_id", "ended_at")
                .get(pk=session_id)
            )
            if session.status == SessionStatus.ENDED or session.current_turn_id is not None:
                continue
            AgentSession.objects.filter(pk=session_id).update(
                status=SessionStatus.ENDED, ended_at=session.ended_at or timezone.now()
            )
            event_emit(session_id=session_id, type="session.ended", payload={"reason": reason})
            ended.append(session_id)
    return ended
