"""The history of a memory a feature keeps every version of (`FeatureDashboard.histories`):
every change (who, which operation, when), one change's text and a line diff against the change
before it or against the text now. A feature's selector reads its versions and builds the page
with `memory_history_make`; the diff is Python's difflib.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

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

    memory: str  # its name (`FeatureDashboard.histories`)
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


def memory_history_make(
    *,
    memory: str,
    current_version: int,
    current_text: str,
    rows: list[HistoryEntry],
    limit: int,
    selected: HistoryEntry | None,
    selected_version: int,
    text: str,
    against: Against,
    previous_text: str = "",
    previous_version: int | None = None,
) -> MemoryHistory:
    """A memory's history page: `rows`, its changes newest first (one more than `limit`, to know
    whether an older page follows), the `selected` change and its `text` (`previous_text`, the
    text of the change before it, `previous_version` its version where it is not the one just
    before), compared `against` the change before or the text now."""
    entries = rows[:limit]
    older = rows[limit - 1].version if len(rows) > limit else None
    if against == "current":
        compare_version, before, after = current_version, text, current_text
    else:
        compare_version = max(selected_version - 1, 0) if previous_version is None else previous_version
        before, after = previous_text, text
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


def history_version_choose(*, version: int | None, current: int, as_of: int | None) -> int:
    """The change a history page selects: `version`, else the one current at the page's moment
    (`as_of`), else the latest. Raises `NotFound` for a version that was never written."""
    chosen = version if version is not None else as_of if as_of is not None else current
    if chosen < 0 or chosen > current:
        raise NotFound
    return chosen
