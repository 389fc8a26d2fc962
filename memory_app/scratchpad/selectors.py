"""Every read of the scratchpad spaces: their values, their revisions, and which nudges are due."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_app.scratchpad import prompts
from memory_app.scratchpad.models import Scratchpad, ScratchpadRevision
from sessions_app.common.content import content_text
from sessions_app.fastpath.rows import object_get
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import Message, MessageRole, Turn


@dataclass(frozen=True)
class ScratchpadView:
    notes: str = ""
    plan: str = ""
    refs: list[str] = field(default_factory=list)
    notes_version: int = 0
    plan_version: int = 0
    refs_version: int = 0
    changed_at_turn: int = 0

    @property
    def is_empty(self) -> bool:
        return not (self.notes or self.plan or self.refs)


def scratchpad_get(*, session_id: uuid.UUID) -> ScratchpadView:
    """The session's three spaces (all empty, version 0, before the first write)."""
    try:
        # Every step's request shows it: one read by key, without the ORM's compiling.
        pad = object_get(Scratchpad, session_id)
    except Scratchpad.DoesNotExist:
        return ScratchpadView()
    return ScratchpadView(
        notes=pad.notes,
        plan=pad.plan,
        refs=list(pad.refs),
        notes_version=pad.notes_version,
        plan_version=pad.plan_version,
        refs_version=pad.refs_version,
        changed_at_turn=pad.changed_at_turn,
    )


def scratchpad_revisions(*, session_id: uuid.UUID, space: str | None = None) -> list[ScratchpadRevision]:
    """The revision trail, oldest first (one space's, or every space's)."""
    qs = ScratchpadRevision.objects.filter(session_id=session_id)
    if space is not None:
        qs = qs.filter(space=space)
    return list(qs.order_by("created_at", "id"))


def scratchpad_revisions_latest(*, session_id: uuid.UUID, space: str, limit: int) -> list[ScratchpadRevision]:
    """One space's `limit` latest revisions, newest first."""
    return list(
        ScratchpadRevision.objects.filter(session_id=session_id, space=space).order_by("-version")[:limit]
    )


# ---------------------------------------------------------------------------
# Nudges (seed 003)
# ---------------------------------------------------------------------------
# Plan-like output: three or more of one kind of line.
PLAN_MIN_ITEMS = 3
_NUMBERED_ITEM = re.compile(r"^\s*\d+[.)]\s+\S", re.MULTILINE)
_STEP_LINE = re.compile(r"^[\s>*#_-]*(?:step|phase|stage)\s+\d+", re.MULTILINE | re.IGNORECASE)
_TASK_ITEM = re.compile(r"^\s*[-*]\s+\[[ xX]\]", re.MULTILINE)


def plan_detected(text: str) -> bool:
    """True when `text` looks like a plan: 3+ numbered items, `Step/Phase/Stage N` lines or
    `- [ ]` task items."""
    return any(
        len(pattern.findall(text)) >= PLAN_MIN_ITEMS for pattern in (_NUMBERED_ITEM, _STEP_LINE, _TASK_ITEM)
    )


def _holds_user_words(message: Message) -> bool:
    return message.role == MessageRole.USER and any(
        isinstance(b, dict) and b.get("type") == "text" for b in resolved(message)
    )


def scratchpad_hints(
    *, session_id: uuid.UUID, epoch: int, settings: dict[str, Any], view: ScratchpadView
) -> list[str]:
    """The `[Hint: ...]` lines due for the model call about to be made, in seed 003's order.

    Everything is derived from stored rows, so it holds across processes and restarts:
    - the turn hints (`nudge_after_turns`, `nudge_on_plan_detected`, `nudge_turns_since_last_use`)
      go with the user's message, i.e. only when the latest stored message is the user's words
      (the first model call of a turn), counting the turns completed before it;
    - `nudge_after_compaction` goes with the first model call of a new epoch (no assistant
      message in it yet), whichever step of a turn that is.
    """
    config = settings.get("scratchpad") or {}
    after_turns = config.get("nudge_after_turns", 0)
    on_plan = config.get("nudge_on_plan_detected", 0) > 0
    after_compaction = config.get("nudge_after_compaction", 0) > 0
    stale_turns = config.get("nudge_turns_since_last_use", 0)
    if not (after_turns or on_plan or after_compaction or stale_turns):
        return []

    in_epoch = Message.objects.filter(session_id=session_id, epoch=epoch)
    hints: list[str] = []
    latest = messages_with_content(in_epoch.only("position", "role", "turn_id")).order_by("-position").first()
    turn_start = latest is not None and _holds_user_words(latest)
    turns_done = 0
    if latest is not None and turn_start:
        # The turns before the one the user's message opens.
        earlier = Turn.objects.filter(session_id=session_id)
        if latest.turn_id is not None:
            earlier = earlier.exclude(pk=latest.turn_id)
        turns_done = earlier.count()
        if after_turns and view.is_empty and turns_done >= after_turns:
            hints.append(prompts.hint_after_turns(turns_done))
        if on_plan and view.is_empty:
            previous = (
                messages_with_content(
                    in_epoch.filter(role=MessageRole.ASSISTANT, position__lt=latest.position).only("pk")
                )
                .order_by("-position")
                .first()
            )
            if previous is not None and plan_detected(content_text(resolved(previous), sep="\n")):
                hints.append(prompts.HINT_PLAN_DETECTED)
    if after_compaction and epoch > 0 and not in_epoch.filter(role=MessageRole.ASSISTANT).exists():
        hints.append(prompts.HINT_AFTER_COMPACTION)
    if turn_start and stale_turns and not view.is_empty:
        idle = turns_done - view.changed_at_turn
        if idle >= stale_turns:
            hints.append(prompts.hint_stale(idle))
    return hints


# ---------------------------------------------------------------------------
# History (the dashboard's history view of one space)
# ---------------------------------------------------------------------------
def scratchpad_empty_value(space: str) -> str | list[str]:
    """A space's value before its first change."""
    return [] if space == "refs" else ""


def scratchpad_revision_get(*, session_id: uuid.UUID, space: str, version: int) -> ScratchpadRevision:
    """One change of one space. Raises `ScratchpadRevision.DoesNotExist`."""
    return ScratchpadRevision.objects.get(session_id=session_id, space=space, version=version)


def scratchpad_value_at_version(*, session_id: uuid.UUID, space: str, version: int) -> str | list[str]:
    """The space as change `version` left it (version 0: empty). Raises
    `ScratchpadRevision.DoesNotExist` for a version that was never written."""
    if version == 0:
        return scratchpad_empty_value(space)
    value = scratchpad_revision_get(session_id=session_id, space=space, version=version).value
    return list(value) if isinstance(value, list) else str(value)


def scratchpad_version_as_of(*, session_id: uuid.UUID, space: str, moment: datetime) -> int:
    """The space's version at `moment` (0 before its first change)."""
    version = (
        ScratchpadRevision.objects.filter(session_id=session_id, space=space, created_at__lte=moment)
        .order_by("-version")
        .values_list("version", flat=True)
        .first()
    )
    return version or 0


def scratchpad_revisions_before(
    *, session_id: uuid.UUID, space: str, before: int | None, limit: int
) -> list[ScratchpadRevision]:
    """Up to `limit` changes of one space older than version `before` (all when None), newest
    first, without their values: one page of the space's history."""
    rows = ScratchpadRevision.objects.filter(session_id=session_id, space=space)
    if before is not None:
        rows = rows.filter(version__lt=before)
    return list(rows.defer("value").order_by("-version")[:limit])
