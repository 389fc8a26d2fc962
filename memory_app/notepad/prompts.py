"""Texts the agent sees, verbatim from the seeds, kept in one place so they are found and changed once.

Do not reword a seed's text here without changing the seed (DESIGN.md).
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Session notepad (seed 000)
# ---------------------------------------------------------------------------
# "How it appears in context": the section heading, followed on the next line by the content.
NOTEPAD_HEADING = "## Session Notepad"

# "If the notepad is empty:" (shown instead of the content while the notepad is null or "").
NOTEPAD_EMPTY_HINT = (
    "(empty — use write_notepad or update_notepad to save working notes, findings, and task "
    "progress; content here survives context compaction)"
)

# Ours (DESIGN.md's cache-aware placement, position `epoch`): before the current notepad shown
# with the latest message each time it changes after the system prompt's copy was taken, where
# it stays for the rest of the epoch (so that the cache keeps it). It goes before the heading, so
# that the last `## Session Notepad` the model reads is the current one, its content from the
# next line; it says so, since earlier copies stay where they were shown.
NOTEPAD_CHANGED_LEAD = (
    "The session notepad has changed since the copy in the system prompt. This copy replaces "
    "that one and any earlier copy; the last one you read is the current notepad:"
)

# "System prompt instruction": the guidance of the default system prompt.
NOTEPAD_GUIDANCE = (
    "For multi-step or complex tasks, use the session notepad to track your plan and record findings "
    "as you work. The notepad survives context compaction — conversation details may be summarized, "
    "but the notepad is preserved in full. Update it after significant findings or completed steps."
)

# Tool descriptions. The seed gives each tool's parameters (used as is in memory_app.notepad.tools)
# and a sentence for two of them; the descriptions start with those sentences.
READ_NOTEPAD_DESCRIPTION = (
    "Read the session notepad. Returns {content}: the whole notepad, an empty string if nothing "
    "has been written yet."
)
WRITE_NOTEPAD_DESCRIPTION = (
    "Full replacement of the notepad content. Use it to rewrite or reorganize the notepad from "
    'scratch, or to clear it by writing "". Returns {ok: true}.'
)
UPDATE_NOTEPAD_DESCRIPTION = (
    "Surgical edits of the session notepad. find_replace replaces the first occurrence of `find` "
    "with `replace` (every occurrence with replace_all: true); append and prepend add `content` "
    "exactly as given (include your own newlines); delete removes every occurrence of `content`. "
    "A `find` or `content` to delete must match the notepad exactly; otherwise nothing changes and "
    "you get an error. Returns {ok: true}."
)
