"""The memory history views: every change of the notepad or of one scratchpad space (who, which
operation, when), one change's text and a line diff against the change before it or against the
text now. Composed from the memory features' selectors; the diff is Python's difflib.
"""

from __future__ import annotations

import difflib
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad.models import NotepadRevision
from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from sessions_app.dashboard.selectors.common import NotFound

HISTORY_PAGE_SIZE = 50
# Unchanged lines shown around each change of a diff.
DIFF_CONTEXT_LINES = 3

Against = Literal["previous", "current"]


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "same", "added", "removed" or "gap" (unchanged lines left out)
    text: str
    old_number: int | None = None
    new_number: int | None = None


@dataclass(frozen=True)
class LineDiff:
    lines: list[DiffLine]
    added: int
    removed: int

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed)


def line_diff(before: str, after: str, *, context: int = DIFF_CONTEXT_LINES) -> LineDiff:
    """The lines that differ from `before` to `after`, with `context` unchanged lines around each
    change and a `gap` line where unchanged lines are left out. Plain text: the template escapes
    it like any text a model wrote."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    lines: list[DiffLine] = []
    added = removed = 0
    for number, group in enumerate(matcher.get_grouped_opcodes(context)):
        first = group[0]
        if number > 0 or first[1] > 0 or first[3] > 0:
            lines.append(DiffLine("gap", f"@@ -{first[1] + 1} +{first[3] + 1} @@"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [
                    DiffLine("same", old[i], old_number=i + 1, new_number=j1 + (i - i1) + 1)
                    for i in range(i1, i2)
                ]
                continue
            if tag in ("replace", "delete"):
                lines += [DiffLine("removed", old[i], old_number=i + 1) for i in range(i1, i2)]
                removed += i2 - i1
            if tag in ("replace", "insert"):
                lines += [DiffLine("added", new[j], new_number=j + 1) for j in range(j1, j2)]
                added += j2 - j1
    return LineDiff(lines=lines, added=added, removed=removed)


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    author: str
    operation: str
    created_at: datetime


@dataclass(frozen=True)
class MemoryHistory:
    """One memory's history page: `entries` (newest first, one page), the `selected` change with
    its `text`, and the diff against `compare_version` (the change before, or the text now)."""

    memory: str  # "notepad", or a space's name
    current_version: int
    current_text: str
    entries: list[HistoryEntry]
    older_before: int | None  # the `before` of the next page, None on the last
    selected: HistoryEntry | None  # None: version 0 (empty, before the first change)
    selected_version: int
    text: str
    against: Against
    compare_version: int
    diff: LineDiff

    @property
    def is_current(self) -> bool:
        return self.selected_version == self.current_version


def space_text(value: str | list[str]) -> str:
    """A space's value as text (refs: one a line), as its editor shows it."""
    return "\n".join(value) if isinstance(value, list) else value


def _page(rows: list, *, limit: int) -> tuple[list, int | None]:
    older = rows[limit - 1].version if len(rows) > limit else None
    return rows[:limit], older


def _history(
    *,
    memory: str,
    current_version: int,
    current_text: str,
    rows: list,
    limit: int,
    selected: HistoryEntry | None,
    selected_version: int,
    text: str,
    against: Against,
    previous_text: str = "",
) -> MemoryHistory:
    entries, older = _page(rows, limit=limit)
    if against == "current":
        compare_version, before, after = current_version, text, current_text
    else:
        compare_version, before, after = max(selected_version - 1, 0), previous_text, text
    return MemoryHistory(
        memory=memory,
        current_version=current_version,
        current_text=current_text,
        entries=entries,
        older_before=older,
        selected=selected,
        selected_version=selected_version,
        text=text,
        against=against,
        compare_version=compare_version,
        diff=line_diff(before, after),
    )


def _selected_version(*, version: int | None, current: int, as_of: int | None) -> int:
    chosen = version if version is not None else as_of if as_of is not None else current
    if chosen < 0 or chosen > current:
        raise NotFound
    return chosen


def notepad_history(
    *,
    session_id: uuid.UUID,
    version: int | None = None,
    at: datetime | None = None,
    against: Against = "previous",
    before: int | None = None,
    limit: int = HISTORY_PAGE_SIZE,
) -> MemoryHistory:
    """The notepad's history with change `version` selected (or the one current at `at`, or the
    latest). Raises `NotFound` for a version that was never written."""
    now = notepad_selectors.notepad_get(session_id=session_id)
    as_of = notepad_selectors.notepad_as_of(session_id=session_id, moment=at).version if at else None
    chosen = _selected_version(version=version, current=now.version, as_of=as_of)
    rows = notepad_selectors.notepad_revisions_before(session_id=session_id, before=before, limit=limit + 1)
    selected: HistoryEntry | None = None
    text = previous = ""
    if chosen > 0:
        try:
            revision = notepad_selectors.notepad_revision_get(session_id=session_id, version=chosen)
            if chosen > 1 and against == "previous":
                previous = notepad_selectors.notepad_at_version(
                    session_id=session_id, version=chosen - 1
                ).content
        except NotepadRevision.DoesNotExist:
            raise NotFound from None
        selected = HistoryEntry(revision.version, revision.author, revision.operation, revision.created_at)
        text = revision.content
    return _history(
        memory="notepad",
        current_version=now.version,
        current_text=now.content,
        rows=[HistoryEntry(r.version, r.author, r.operation, r.created_at) for r in rows],
        limit=limit,
        selected=selected,
        selected_version=chosen,
        text=text,
        against=against,
        previous_text=previous,
    )


def scratchpad_history(
    *,
    session_id: uuid.UUID,
    space: str,
    version: int | None = None,
    at: datetime | None = None,
    against: Against = "previous",
    before: int | None = None,
    limit: int = HISTORY_PAGE_SIZE,
) -> MemoryHistory:
    """One scratchpad space's history, as `notepad_history`. Raises `NotFound` for an unknown
    space or a version that was never written."""
    if space not in ScratchpadSpace.values:
        raise NotFound
    now = scratchpad_selectors.scratchpad_get(session_id=session_id)
    current_version: int = getattr(now, f"{space}_version")
    as_of = (
        scratchpad_selectors.scratchpad_version_as_of(session_id=session_id, space=space, moment=at)
        if at
        else None
    )
    chosen = _selected_version(version=version, current=current_version, as_of=as_of)
    rows = scratchpad_selectors.scratchpad_revisions_before(
        session_id=session_id, space=space, before=before, limit=limit + 1
    )
    selected: HistoryEntry | None = None
    text = previous = ""
    if chosen > 0:
        try:
            revision = scratchpad_selectors.scratchpad_revision_get(
                session_id=session_id, space=space, version=chosen
            )
            if chosen > 1 and against == "previous":
                previous = space_text(
                    scratchpad_selectors.scratchpad_value_at_version(
                        session_id=session_id, space=space, version=chosen - 1
                    )
                )
        except ScratchpadRevision.DoesNotExist:
            raise NotFound from None
        selected = HistoryEntry(revision.version, revision.author, revision.action, revision.created_at)
        text = space_text(revision.value)
    return _history(
        memory=space,
        current_version=current_version,
        current_text=space_text(getattr(now, space)),
        rows=[HistoryEntry(r.version, r.author, r.action, r.created_at) for r in rows],
        limit=limit,
        selected=selected,
        selected_version=chosen,
        text=text,
        against=against,
        previous_text=previous,
    )
