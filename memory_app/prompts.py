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

# "System prompt instruction": the guidance of the default system prompt.
NOTEPAD_GUIDANCE = (
    "For multi-step or complex tasks, use the session notepad to track your plan and record findings "
    "as you work. The notepad survives context compaction — conversation details may be summarized, "
    "but the notepad is preserved in full. Update it after significant findings or completed steps."
)

# Tool descriptions. The seed gives each tool's parameters (used as is in memory_app.tools.notepad)
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

# ---------------------------------------------------------------------------
# Compaction (seeds 000 and 002)
# ---------------------------------------------------------------------------

# Seed 000, "Pre-compaction warning", step 2: injected as a user-role notice one step before compacting.
PRE_COMPACTION_WARNING = """[System] Context is approaching the token limit and will be compacted after your next response.
Review your session notepad and update it with any working state, findings, or progress you
need to preserve. Conversation details may be summarized during compaction, but the notepad
is kept in full."""

# Seed 002, "Summary Generation": the independent summary call's own system prompt, built from the
# seed's keep/discard table with the user's latest intent and next steps first.
COMPACTION_SUMMARY_SYSTEM_PROMPT = """Summarize this conversation so that an assistant can continue it without the original messages.

Start with the most critical items:
1. The user's current intent and what to do next (the next steps).
2. Ongoing tasks and their status.

Then keep:
- Key decisions and conclusions reached.
- User preferences and relevant context (names, values, paths, identifiers that matter).

Discard: greetings and small talk, inner reasoning steps, redundant tool call details, and intermediate tool results.

Write plain, dense prose or short lists. Do not address the user; do not add anything that is not in the conversation."""

COMPACTION_SUMMARY_INSTRUCTION = "Write the summary of the conversation above now."
COMPACTION_COMBINE_INSTRUCTION = (
    "These are summaries of consecutive parts of one conversation, oldest first. "
    "Combine them into one summary, following the same rules."
)

# The first message of a new epoch (seed 002: the new session starts with the summary and a
# reference to the archive).
COMPACTION_SUMMARY_MESSAGE = (
    "[Summary of the conversation so far. Earlier messages were compacted into this summary; "
    "session_archive_read reads them.]\n\n{summary}"
)
