"""Every change of the scratchpad spaces (seed 003): the agent's tool actions and operators' edits.

Rules that hold for every service here:
- One transaction per change, with the session's row locked (`select_for_update`) before the
  scratchpad is read: concurrent writers of one session queue, so no change is lost.
- A change bumps the changed space's version, writes a `ScratchpadRevision` (the value after the
  change) and emits `scratchpad.updated` (`space`, `value`, `author`, `version`; the refs value
  is the list) in that transaction; watchers hear of it after commit.
- A rejected change writes nothing.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from memory_app.scratchpad import prompts
from memory_app.scratchpad.models import Scratchpad, ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.settings import SETTINGS
from sessions_app.models import AgentSession, Turn
from sessions_app.services import event_emit

ACTIONS = ("set_notes", "append_notes", "set_plan", "refs.add", "refs.remove", "refs.set")
# `append_notes` joins with one newline when the notes are not empty (DESIGN.md).
NOTES_APPEND_SEPARATOR = "\n"
# A ref is one path, URL or identifier; the refs budget counts items, so one item's size is
# bounded here or a single ref could outgrow the whole notes budget.
REF_MAX_CHARS = 2000
# The revision `action` of an operator's edit.
OPERATOR_ACTION = "set"


@dataclass(frozen=True)
class ScratchpadLimits:
    notes_max_chars: int
    plan_max_chars: int
    refs_max_items: int

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> ScratchpadLimits:
        """The limits of a session's settings (PROTOCOL.md `scratchpad.*`), defaults filled in."""
        given = settings.get("scratchpad") if isinstance(settings, dict) else None
        merged = {**SETTINGS["scratchpad"], **(given or {})}
        return cls(
            notes_max_chars=merged["notes_max_chars"],
            plan_max_chars=merged["plan_max_chars"],
            refs_max_items=merged["refs_max_items"],
        )


class ScratchpadActionError(Exception):
    """The agent misused the tool; the message says what to do instead. Nothing was changed."""


class ScratchpadInvalidValue(ValueError):
    """An operator's value does not fit the space (wrong type, over the session's limit)."""


class ScratchpadConflict(Exception):
    """The space changed since the operator loaded it. Nothing was overwritten; the current value
    and version are carried so the editor can show them."""

    def __init__(self, *, space: str, current_value: str | list[str], current_version: int) -> None:
        super().__init__(f"the {space} space changed (now version {current_version})")
        self.space = space
        self.current_value = current_value
        self.current_version = current_version


@dataclass(frozen=True)
class ScratchpadChange:
    space: str
    value: str | list[str]
    version: int
    # What the tool answers the model (usage, truncation warnings); empty for operators.
    message: str = ""


@dataclass(frozen=True)
class _Planned:
    space: str
    value: str | list[str]
    message: str


# ---------------------------------------------------------------------------
# The agent's actions (pure: what a call would change, or why it is refused)
# ---------------------------------------------------------------------------
def _content(args: dict, action: str) -> str:
    content = args.get("content")
    if not isinstance(content, str):
        raise ScratchpadActionError(prompts.CONTENT_NOT_STRING.format(action=action))
    return content


def _ref(args: dict, action: str) -> str:
    ref = args.get("ref")
    if not isinstance(ref, str) or not ref.strip():
        raise ScratchpadActionError(prompts.REF_NOT_STRING.format(action=action))
    ref = ref.strip()
    if len(ref) > REF_MAX_CHARS:
        raise ScratchpadActionError(prompts.REF_TOO_LONG.format(length=len(ref), limit=REF_MAX_CHARS))
    return ref


def _replace_text(*, space: str, content: str, limit: int, done: str) -> _Planned:
    value = content[:limit]
    message = done.format(used=len(value), limit=limit)
    if len(content) > limit:
        message += prompts.TRUNCATED.format(space=space, limit=limit, original=len(content))
    return _Planned(space, value, message)


def _plan_action(*, pad: Scratchpad, action: Any, args: dict, limits: ScratchpadLimits) -> _Planned:
    if action is None or action == "":
        raise ScratchpadActionError(prompts.ACTION_MISSING)
    if not isinstance(action, str) or action not in ACTIONS:
        raise ScratchpadActionError(prompts.ACTION_UNKNOWN.format(action=json.dumps(action)))

    if action == "set_notes":
        return _replace_text(
            space="notes",
            content=_content(args, action),
            limit=limits.notes_max_chars,
            done=prompts.NOTES_SET,
        )
    if action == "set_plan":
        return _replace_text(
            space="plan", content=_content(args, action), limit=limits.plan_max_chars, done=prompts.PLAN_SET
        )
    if action == "append_notes":
        added = _content(args, action)
        if not added:
            raise ScratchpadActionError(prompts.APPEND_EMPTY)
        combined = pad.notes + NOTES_APPEND_SEPARATOR + added if pad.notes else added
        limit = limits.notes_max_chars
        if len(combined) > limit:
            raise ScratchpadActionError(
                prompts.APPEND_OVER_BUDGET.format(
                    limit=limit, current=len(pad.notes), added=len(added), combined=len(combined)
                )
            )
        return _Planned("notes", combined, prompts.NOTES_APPENDED.format(used=len(combined), limit=limit))

    refs: list[str] = list(pad.refs)
    limit = limits.refs_max_items
    if action == "refs.add":
        ref = _ref(args, action)
        if ref in refs:
            refs.remove(ref)
            refs.append(ref)
            return _Planned("refs", refs, prompts.REF_ALREADY_PRESENT.format(used=len(refs), limit=limit))
        refs.append(ref)
        # Whole refs are dropped, oldest first: a ref is never cut mid-value.
        dropped, refs = refs[: max(len(refs) - limit, 0)], refs[-limit:]
        if dropped:
            message = prompts.REF_ADDED_DROPPED.format(
                used=len(refs), limit=limit, dropped=", ".join(dropped)
            )
        else:
            message = prompts.REF_ADDED.format(used=len(refs), limit=limit)
        return _Planned("refs", refs, message)
    if action == "refs.remove":
        ref = _ref(args, action)
        if ref not in refs:
            raise ScratchpadActionError(prompts.REF_NOT_FOUND.format(ref=json.dumps(ref, ensure_ascii=False)))
        refs.remove(ref)
        return _Planned("refs", refs, prompts.REF_REMOVED.format(used=len(refs), limit=limit))
    # refs.set
    items = args.get("items")
    if not isinstance(items, list):
        raise ScratchpadActionError(prompts.ITEMS_NOT_LIST)
    kept: list[str] = []
    for item in items:
        # Silently dropped (seed 003): non-strings; and, to keep the refs invariants of refs.add,
        # empty or over-long strings and repeats.
        if not isinstance(item, str) or not item.strip() or len(item.strip()) > REF_MAX_CHARS:
            continue
        if item.strip() not in kept:
            kept.append(item.strip())
    kept = kept[:limit]
    return _Planned("refs", kept, prompts.REFS_SET.format(used=len(kept), limit=limit))


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------
def scratchpad_session_lock(session_id: uuid.UUID) -> AgentSession:
    """Lock the session row (inside a transaction): scratchpad writes of a session queue here."""
    return AgentSession.objects.select_for_update().only("id", "settings").get(pk=session_id)


def _pad_of(session: AgentSession) -> Scratchpad:
    # Under the session's lock, so two first writes cannot both create the row.
    return Scratchpad.objects.filter(pk=session.id).first() or Scratchpad(session=session)


def _write(
    *, pad: Scratchpad, space: str, value: str | list[str], author: str, action: str, message: str = ""
) -> ScratchpadChange:
    version = pad.version_of(space) + 1
    setattr(pad, space, value)
    setattr(pad, f"{space}_version", version)
    pad.changed_at_turn = Turn.objects.filter(session_id=pad.session_id).count()
    pad.save()
    ScratchpadRevision.objects.create(
        session_id=pad.session_id, space=space, version=version, value=value, author=author, action=action
    )
    event_emit(
        session_id=pad.session_id,
        type="scratchpad.updated",
        payload={"space": space, "value": value, "author": author, "version": version},
    )
    return ScratchpadChange(space=space, value=value, version=version, message=message)


def scratchpad_apply(
    *, session_id: uuid.UUID, action: Any, args: dict, author: str, limits: ScratchpadLimits
) -> ScratchpadChange:
    """Apply one `session_scratchpad` call (seed 003's actions and budget rules).

    - `set_notes` / `set_plan` replace the space, truncated to `notes_max_chars` /
      `plan_max_chars`; the message then warns with the original length.
    - `append_notes` joins with one newline when notes are not empty; it is refused (notes
      unchanged) when the result would exceed `notes_max_chars`.
    - `refs.add` takes a non-empty string (trimmed, at most REF_MAX_CHARS); an existing ref moves
      to the newest place; at capacity the oldest refs are dropped whole.
    - `refs.remove` removes an exact match or is refused.
    - `refs.set` keeps the first `refs_max_items` usable strings; anything else is dropped silently.
    Returns the change with the message for the model (the space's usage). Raises
    `ScratchpadActionError` (missing or unknown action, bad parameter, over-budget append,
    unknown ref) having changed nothing.
    """
    with transaction.atomic():
        pad = _pad_of(scratchpad_session_lock(session_id))
        planned = _plan_action(pad=pad, action=action, args=args, limits=limits)
        return _write(
            pad=pad,
            space=planned.space,
            value=planned.value,
            author=author,
            action=str(action),
            message=planned.message,
        )


def scratchpad_operator_value_clean(*, space: str, value: Any, limits: ScratchpadLimits) -> str | list[str]:
    """An operator's value for `space`, as stored; `ScratchpadInvalidValue` if it does not fit."""
    if space in (ScratchpadSpace.NOTES, ScratchpadSpace.PLAN):
        limit = limits.notes_max_chars if space == ScratchpadSpace.NOTES else limits.plan_max_chars
        if not isinstance(value, str):
            raise ScratchpadInvalidValue(f"{space} must be text")
        if len(value) > limit:
            raise ScratchpadInvalidValue(f"{space} is {len(value)} chars; this session allows {limit}")
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ScratchpadInvalidValue("refs must be a list of strings")
    refs = [item.strip() for item in value]
    if any(not ref for ref in refs):
        raise ScratchpadInvalidValue("a ref must not be empty")
    too_long = [ref for ref in refs if len(ref) > REF_MAX_CHARS]
    if too_long:
        raise ScratchpadInvalidValue(f"a ref holds at most {REF_MAX_CHARS} chars")
    if len(set(refs)) != len(refs):
        raise ScratchpadInvalidValue("refs must be distinct")
    if len(refs) > limits.refs_max_items:
        raise ScratchpadInvalidValue(f"{len(refs)} refs; this session allows {limits.refs_max_items}")
    return refs


def scratchpad_space_set(
    *, session_id: uuid.UUID, space: str, value: Any, author: str, expected_version: int
) -> ScratchpadChange:
    """An operator's edit of one space, with optimistic concurrency.

    `expected_version` is the space's version the operator's editor loaded. If the space changed
    since, `ScratchpadConflict` carries its current value and version and nothing is written.
    The value must fit the session's limits as it is (operators are told, never truncated):
    otherwise `ScratchpadInvalidValue`. Returns the change (the space's new version).
    """
    if space not in ScratchpadSpace.values:
        raise ScratchpadInvalidValue(f"unknown space {space!r}; spaces: notes, plan, refs")
    with transaction.atomic():
        session = scratchpad_session_lock(session_id)
        pad = _pad_of(session)
        current = pad.version_of(space)
        if current != expected_version:
            raise ScratchpadConflict(space=space, current_value=pad.value_of(space), current_version=current)
        clean = scratchpad_operator_value_clean(
            space=space, value=value, limits=ScratchpadLimits.from_settings(session.settings)
        )
        return _write(pad=pad, space=space, value=clean, author=author, action=OPERATOR_ACTION)


# The revision `action` of a space copied from a parent session when it was forked (seed 000).
FORK_ACTION = "fork"


def scratchpad_copy(*, source_session_id: uuid.UUID, target_session_id: uuid.UUID, author: str) -> None:
    """Give the target session the source's spaces as they are now (`fork_session`, seed 000).

    Each non-empty space is one change of the target (a version, a revision with action `fork`,
    a `scratchpad.updated` event); empty spaces stay untouched. Nothing of the source changes, and
    afterwards the two scratchpads are independent.
    """
    with transaction.atomic():
        source = Scratchpad.objects.filter(pk=source_session_id).first()
        if source is None or source.is_empty:
            return
        pad = _pad_of(scratchpad_session_lock(target_session_id))
        for space in ScratchpadSpace.values:
            value = source.value_of(space)
            if value:
                _write(pad=pad, space=space, value=value, author=author, action=FORK_ACTION)
