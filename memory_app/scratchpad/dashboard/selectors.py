"""The scratchpad as the dashboard shows it, composed from the scratchpad's own selectors: each
space with its limit and its latest revisions."""

from __future__ import annotations

from dataclasses import dataclass

from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.services import ScratchpadLimits
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
