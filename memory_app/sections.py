"""Context sections of the memory features, appended to the engine's `SECTIONS` in prompt order.

Methods are called in a DB thread while a request is built, so they query the ORM directly.
"""

from __future__ import annotations

from memory_app import selectors
from memory_app.notepad import (
    NOTEPAD_POSITION_MESSAGE,
    NOTEPAD_POSITION_SYSTEM,
    notepad_enabled,
    notepad_position,
    notepad_section_text,
)
from memory_app.prompts import NOTEPAD_GUIDANCE
from sessions_app.engine.context import SECTIONS
from sessions_app.engine.snapshot import SessionSnapshot


# ---------------------------------------------------------------------------
# Session notepad (seed 000)
# ---------------------------------------------------------------------------
class NotepadSection:
    """The seed's guidance in the stable system prompt; the `## Session Notepad` section, in
    full on every call, after the cache breakpoint of the system prompt (position `system`) or
    before the latest user message for this call only (position `message`)."""

    name = "notepad"

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return [NOTEPAD_GUIDANCE] if notepad_enabled(session) else []

    def _section(self, session: SessionSnapshot, position: str) -> list[str]:
        if not notepad_enabled(session) or notepad_position(session) != position:
            return []
        return [notepad_section_text(selectors.notepad_get(session_id=session.id).content)]

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_SYSTEM)

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_MESSAGE)


NOTEPAD_SECTION = NotepadSection()
SECTIONS.append(NOTEPAD_SECTION)
