"""The memory panels: the notepad with its revisions, the scratchpad spaces with their limits and
revisions, the observations. Composed from the memory features' own selectors: the dashboard
queries no memory table itself."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from memory_app.notepad import selectors as notepad_selectors
from memory_app.observations import selectors as observation_selectors
from memory_app.observations.models import Observation
from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.services import ScratchpadLimits
from sessions_app.dashboard.selectors.common import NotFound
from sessions_app.models import AgentSession

NOTEPAD_REVISIONS_SHOWN = 30
SCRATCHPAD_REVISIONS_SHOWN = 10
OBSERVATIONS_SHOWN = 50


# ---------------------------------------------------------------------------
# Notepad
# ---------------------------------------------------------------------------
def notepad_panel(*, session_id: uuid.UUID) -> dict[str, Any]:
    """The notepad panel's context (the page, its partials and the live fragments all render it
    from this): `notepad`, the notepad now, and `notepad_revisions`, its latest changes."""
    return {
        "notepad": notepad_selectors.notepad_get(session_id=session_id),
        "notepad_revisions": notepad_selectors.notepad_revisions_latest(
            session_id=session_id, limit=NOTEPAD_REVISIONS_SHOWN
        ),
    }


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
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
        return "\n".join(self.value) if isinstance(self.value, list) else self.value

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


# ---------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------
def observations_of(*, session_id: uuid.UUID, limit: int = OBSERVATIONS_SHOWN) -> list[Observation]:
    return observation_selectors.observations_latest(session_id=session_id, limit=limit)


def observation_get_for_operator(*, session_id: uuid.UUID, observation_id: Any) -> Observation:
    observation = observation_selectors.observation_get_for_session(
        session_id=session_id, observation_id=observation_id
    )
    if observation is None:
        raise NotFound
    return observation
