"""The seed's notepad texts, verbatim (seed 000)."""

from __future__ import annotations

from memory_app.notepad.prompts import NOTEPAD_HEADING
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING


def test_heading_is_the_seeds() -> None:
    assert NOTEPAD_HEADING == "## Session Notepad"


def test_compaction_warning_is_the_seeds_text_with_its_line_breaks() -> None:
    assert PRE_COMPACTION_WARNING == (
        "[System] Context is approaching the token limit and will be compacted after your next response.\n"
        "Review your session notepad and update it with any working state, findings, or progress you\n"
        "need to preserve. Conversation details may be summarized during compaction, but the notepad\n"
        "is kept in full."
    )
