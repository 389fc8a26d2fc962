"""The engine's own texts (seeds 000, 002 and 004), verbatim, in one place: the pre-compaction
warning, the summary call's prompts, the first message of a new epoch, what a masked tool result
reads as, and the marker of a text cut in the middle (which observations and compaction's
transcript both use).

Do not reword a seed's text here without changing the seed (DESIGN.md).
"""

from __future__ import annotations

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

# The note a long turn's older steps are summarized into (issue 31 item 8): kept inside the turn,
# after its user's request (which stays verbatim) and before its newest steps (verbatim too).
TURN_SUMMARY_MESSAGE = (
    "[Summary of your earlier steps in this turn. They were compacted into this summary to make "
    "room; session_archive_read reads them. Your newest steps follow verbatim.]\n\n{summary}"
)
# The summary call of a turn's older steps: the turn's request is named, not summarized.
COMPACTION_TURN_INSTRUCTION = (
    "The conversation above is the earlier part of a turn that is still running, in answer to "
    "this request of the user's (which stays in the context verbatim):\n<request>\n{request}\n"
    "</request>\nWrite the summary of the assistant's steps above now: what was done, found and "
    "decided, with the values that matter, and what remains to do."
)
COMPACTION_TURN_MERGE_INSTRUCTION = (
    "The conversation above is the earlier part of a turn that is still running, in answer to "
    "this request of the user's (which stays in the context verbatim):\n<request>\n{request}\n"
    "</request>\nWrite one updated summary of the assistant's steps: merge the summary of the "
    "earlier steps with the steps above it into a single summary (do not quote or nest the "
    "earlier summary): what was done, found and decided, with the values that matter, and what "
    "remains to do."
)

# Compaction's cheap tier: what a masked tool result reads as (DESIGN.md: a short placeholder
# naming the observation and its size, not the seed's 500 + 500 preview).
MASKED_RESULT = (
    "[Tool result masked to save context: {size} characters, kept whole as observation "
    "{observation_id}. Read it with scratchpad_read (scratchpad_id {observation_id}) if you need it.]"
)
MASKED_RESULT_UNSTORED = (
    "[Tool result masked to save context: {size} characters. It is kept in the session's history "
    "and archive.]"
)

# The summary call when an earlier summary exists: the two merge into one (never nested).
COMPACTION_PREVIOUS_SUMMARY_HEADING = "Summary of the conversation before this part:"
COMPACTION_MERGE_INSTRUCTION = (
    "Write one updated summary of the whole conversation: merge the summary of the earlier part "
    "with the conversation above it into a single summary (do not quote or nest the earlier summary)."
)
# Appended to every summary instruction: the summary's bound.
COMPACTION_LENGTH_LIMIT = "Keep the summary under {words} words."

# The summary call in the session's own layout (`compaction.summary_call: "shared"`): the
# session's tools, system prompt and history as its last request sent them (so the provider reads
# them from the prompt cache), then one user message with these words, seed 002's summary prompt
# and the instruction. No tool is run: an answer that calls one is not taken, and the summary is
# asked again of the separate call (own system prompt, no tools).
COMPACTION_SHARED_HEAD = (
    "[System] Compaction: the conversation above is about to be replaced by a summary. Do not call "
    "any tool and do not go on with the work: answer with the summary only, as text, by these rules."
)
COMPACTION_SHARED_MERGE_INSTRUCTION = (
    "The conversation above starts with a summary of its earlier part. Write one updated summary "
    "of the whole conversation: merge that summary with the conversation after it into a single "
    "summary (do not quote or nest the earlier summary)."
)


# ---------------------------------------------------------------------------
# A text cut in the middle (seed 004)
# ---------------------------------------------------------------------------

# Seed 004's marker lives with the rule that fills it in (`common.content`), which the data
# layer and the dashboard share: the engine uses it from there.
from sessions_app.common.content import OMITTED_MARKER  # noqa: E402,F401

# ---------------------------------------------------------------------------
# An agent's knowledge in its sessions' system prompt (DESIGN.md, "Agents"; seed 000)
# ---------------------------------------------------------------------------
LEARNED_HEADING = "## Learned Instructions"
# Shown instead of the learned text while it is empty and the session may edit it.
LEARNED_EMPTY_HINT = (
    "(empty — use edit_system_prompt to keep lasting instructions and observations for all your "
    "future sessions)"
)
SKILLS_HEADING = "## Skills"
SKILLS_READ_LINE = "Read a skill in full with read_skill before you follow it."
