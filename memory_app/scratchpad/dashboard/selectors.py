"""The scratchpad as the dashboard shows it, composed from the scratchpad's own selectors: each
space with its limit and its latest revisions (its panel), and each space's history page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.services import ScratchpadLimits
from sessions_app.dashboard.selectors import (
    HISTORY_PAGE_SIZE,
    Against,
    HistoryEntry,
    MemoryHistory,
    NotFound,
    history_version_choose,
    memory_history_make,
)
from sessions_app.models import AgentSession

SCRATCHPAD_REVISIONS_SHOWN = 10


def space_text(value: str | list[str]) -> str:
    """A space's value as text (refs: one a line), as its editor shows it."""
    return "\n".join(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class SpaceView:
    name: str
    value: str | list[str]
    used: int  # characters, or items for refs
    limit: int
    version: int
    revisions: list[ScratchpadRevision]  # the latest, newest first

    @property
    def text(self) -> str:
        """The value as the editor shows it (refs: one a line)."""
        return space_text(self.value)

    @property
    def unit(self) -> str:
        return "items" if self.name == ScratchpadSpace.REFS else "chars"


def scratchpad_spaces(*, session: AgentSession, only: str | None = None) -> list[SpaceView]:
    """The three spaces (or `only` one) with their limits and latest revisions."""
    view = scratchpad_selectors.scratchpad_get(session_id=session.pk)
    limits = ScratchpadLimits.from_settings(session.settings)
    limit_of: dict[str, int] = {
        ScratchpadSpace.NOTES: limits.notes_max_chars,
        ScratchpadSpace.PLAN: limits.plan_max_chars,
        ScratchpadSpace.REFS: limits.refs_max_items,
    }
    names = [only] if only else list(ScratchpadSpace.values)
    spaces = []
    for name in names:
        value: str | list[str] = getattr(view, name)
        spaces.append(
            SpaceView(
                name=name,
                value=value,
                used=len(value),
                limit=limit_of[name],
                version=getattr(view, f"{name}_version"),
                revisions=scratchpad_selectors.scratchpad_revisions_latest(
                    session_id=session.pk, space=name, limit=SCRATCHPAD_REVISIONS_SHOWN
                ),
            )
        )
    return spaces


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
    """One space's history with change `version` selected (or the one current at `at`, or the
    latest). Raises `NotFound` for an unknown space or a version that was never written."""
    if space not in ScratchpadSpace.values:
        raise NotFound
    now = scratchpad_selectors.scratchpad_get(session_id=session_id)
    current_version: int = getattr(now, f"{space}_version")
    as_of = (
        scratchpad_selectors.scratchpad_version_as_of(session_id=session_id, space=space, moment=at)
        if at
        else None
    )
    chosen = history_version_choose(version=version, current=current_version, as_of=as_of)
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
    return memory_history_make(
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
