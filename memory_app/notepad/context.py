"""The session notepad's place in each model request (seed 000): its settings, its guidance, and
the `## Session Notepad` section.

Methods are called in a DB thread while a request is built, so they may use the ORM.
"""

from __future__ import annotations

from memory_app.notepad import selectors
from memory_app.notepad.prompts import (
    NOTEPAD_CHANGED_LEAD,
    NOTEPAD_EMPTY_HINT,
    NOTEPAD_GUIDANCE,
    NOTEPAD_HEADING,
)
from memory_app.notepad.settings import (
    NOTEPAD_POSITION_EPOCH,
    NOTEPAD_POSITION_MESSAGE,
    NOTEPAD_POSITION_SYSTEM,
)
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
    full on every call: in position `epoch` pinned in the system prompt as of the epoch's start
    (inside the cached prefix) and, each time it changes, the current one with the latest message
    (`pinned_changed`, anchored there by the engine: DESIGN.md's cache-aware placement); in
    position `system` after the cache breakpoint of the system prompt; in position `message`
    before the latest user message for this call only."""

    name = "notepad"

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return [NOTEPAD_GUIDANCE] if notepad_enabled(session) else []

    def _current(self, session: SessionSnapshot) -> str:
        # The row the step's snapshot was read from holds it (`SessionSnapshot.notepad`): read
        # again only when the snapshot was made without it.
        content = session.notepad
        if content is None:
            content = selectors.notepad_get(session_id=session.id).content
        return notepad_section_text(content)

    def _section(self, session: SessionSnapshot, position: str) -> list[str]:
        if not notepad_enabled(session) or notepad_position(session) != position:
            return []
        return [self._current(session)]

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_EPOCH)

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        # The words come before the heading: the last `## Session Notepad` the model reads is
        # the current one, its content from the heading's next line.
        if not texts or notepad_position(session) != NOTEPAD_POSITION_EPOCH:
            return None
        return f"{NOTEPAD_CHANGED_LEAD}\n\n{texts[0]}"

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_SYSTEM)

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return self._section(session, NOTEPAD_POSITION_MESSAGE)


NOTEPAD_SECTION = NotepadSection()
