"""The session notepad's place in each model request (seed 000): its settings, its guidance, and
the `## Session Notepad` section.

Methods are called in a DB thread while a request is built, so they may use the ORM.
"""

from __future__ import annotations

from memory_app.notepad import selectors
from memory_app.notepad.prompts import NOTEPAD_EMPTY_HINT, NOTEPAD_GUIDANCE, NOTEPAD_HEADING
from memory_app.notepad.settings import NOTEPAD_POSITION_MESSAGE, NOTEPAD_POSITION_SYSTEM
from sessions_app.engine.contract import SessionSnapshot


def notepad_enabled(session: SessionSnapshot) -> bool:
    return bool(session.setting("notepad", "enabled"))


def notepad_position(session: SessionSnapshot) -> str:
    return str(session.setting("notepad", "position"))


def notepad_section_text(content: str) -> str:
    """The `## Session Notepad` section: the content, or the empty-state hint while empty."""
    return f"{NOTEPAD_HEADING}\n{content or NOTEPAD_EMPTY_HINT}"


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
        # The row the step's snapshot was read from holds it (`SessionSnapshot.notepad`): read
        # again only when the snapshot was made without it.
        content = session.notepad
        if content is None:
            content = selectors.notepad_get(session_id=session.id).content
        return [notepad_section_text(content)]

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_SYSTEM)

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_MESSAGE)


NOTEPAD_SECTION = NotepadSection()
