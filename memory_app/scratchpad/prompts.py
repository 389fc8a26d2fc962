"""Every text of the scratchpad spaces that the model reads, in one place.

Verbatim from the seeds: the block markers (seed 001), the tool description's first sentences and
the system-prompt guidance (seed 001, adapted to seed 003's three spaces and to the real tool name
`session_scratchpad`: the API allows no dot in a tool name), and the "Don't write" line (seed 003).
The tool results, errors, block headings and hints are Palimpsest's own wording (the seeds give
their meaning, not their text).
"""

from __future__ import annotations

TOOL_NAME = "session_scratchpad"

# ---------------------------------------------------------------------------
# The block (seed 001's markers), prepended to the latest user message of every model call
# ---------------------------------------------------------------------------
BLOCK_START = "[Session Scratchpad - your persistent working memory]"
BLOCK_END = "[End Scratchpad]"
# One heading per non-empty space, with its usage so the model sees when a space fills up.
BLOCK_NOTES_HEADING = "## Notes ({used}/{limit} chars)"
BLOCK_PLAN_HEADING = "## Plan ({used}/{limit} chars)"
BLOCK_REFS_HEADING = "## Refs ({used}/{limit})"
BLOCK_REF_ITEM = "- {ref}"

# ---------------------------------------------------------------------------
# The tool
# ---------------------------------------------------------------------------
TOOL_DESCRIPTION = (
    "Persist important working state (plans, findings, decisions) that survives context "
    "compaction. Content is prepended to each message you receive. Three spaces: notes "
    "(unstructured working memory: findings, decisions, constraints, partial state), plan (the "
    "current multi-step plan as a concise ordered list) and refs (atomic references: file paths, "
    "URLs, PR links, identifiers). Actions: set_notes, append_notes and set_plan take `content`; "
    "refs.add and refs.remove take `ref`; refs.set takes `items`."
)
ACTION_DESCRIPTION = (
    "set_notes: replace notes entirely. append_notes: append to notes (rejected if the result would "
    "exceed the notes budget; notes unchanged). set_plan: replace the plan entirely. refs.add: add one "
    "ref (the oldest is dropped when full). refs.remove: remove one ref by exact match. refs.set: "
    "replace all refs."
)
CONTENT_DESCRIPTION = "For set_notes, append_notes and set_plan: the text."
REF_DESCRIPTION = "For refs.add and refs.remove: one reference (a file path, URL or identifier)."
ITEMS_DESCRIPTION = "For refs.set: the complete new list of references."

# ---------------------------------------------------------------------------
# Guidance in the stable system prompt (seed 001's section, adapted to three spaces)
# ---------------------------------------------------------------------------
GUIDANCE = "\n".join(
    [
        "## Session Scratchpad",
        "You have a persistent scratchpad tool (session_scratchpad) that survives context compaction.",
        "Use it to save: multi-step plans, key findings, important decisions, accumulated state.",
        "The scratchpad is prepended to each message you receive. Budget: notes {notes_max_chars} chars, "
        "plan {plan_max_chars} chars, refs {refs_max_items} items.",
        'Call session_scratchpad with action "set_notes" to overwrite the notes or "append_notes" to add '
        'to them incrementally, "set_plan" to replace the plan, and "refs.add", "refs.remove" or '
        '"refs.set" for references.',
        "Set the plan as soon as a multi-step plan forms and update it as steps complete; record key "
        "facts (errors, config values, root causes) in notes; add files and URLs you will need again to "
        "refs. When notes or plan get full, rewrite them as a tighter summary.",
        "**Don't write:** full file contents, conversation history, speculative ideas, the user's "
        "original request.",
    ]
)
GUIDANCE_NUDGES = (
    "You may see [Hint: ...] lines before a message, reminding you to use your scratchpad; follow them."
)

# ---------------------------------------------------------------------------
# Tool results: each success reports the space's usage
# ---------------------------------------------------------------------------
NOTES_SET = "notes set: {used}/{limit} chars used"
NOTES_APPENDED = "notes appended: {used}/{limit} chars used"
PLAN_SET = "plan set: {used}/{limit} chars used"
# Seed 001's truncation warning, in characters.
TRUNCATED = ". Warning: {space} truncated to {limit} chars (original: {original}). Consider summarizing."
REF_ADDED = "ref added: {used}/{limit} refs used"
REF_ADDED_DROPPED = "ref added: {used}/{limit} refs used. The oldest ref was dropped to make room: {dropped}"
REF_ALREADY_PRESENT = "ref already present, moved to the newest place: {used}/{limit} refs used"
REF_REMOVED = "ref removed: {used}/{limit} refs used"
REFS_SET = "refs set: {used}/{limit} refs used"

# ---------------------------------------------------------------------------
# Tool errors (the model reads them and can act on them)
# ---------------------------------------------------------------------------
VALID_ACTIONS_TEXT = "Valid actions: set_notes, append_notes, set_plan, refs.add, refs.remove, refs.set."
ACTION_MISSING = "Missing action. " + VALID_ACTIONS_TEXT
ACTION_UNKNOWN = "Unknown action {action}. " + VALID_ACTIONS_TEXT
CONTENT_NOT_STRING = "{action} needs content (a string)."
APPEND_EMPTY = "append_notes needs content (a non-empty string)."
# Seed 001's append rejection, in characters.
APPEND_OVER_BUDGET = (
    "Append would exceed the {limit}-char notes budget (current: {current}, append: {added}, "
    "combined: {combined}). Notes are unchanged. Use set_notes to rewrite them as a tighter summary, "
    "or reduce content."
)
REF_NOT_STRING = "{action} needs ref (a non-empty string)."
REF_TOO_LONG = (
    "The ref is {length} chars; a ref holds at most {limit} (a file path, URL or identifier). "
    "Put longer text in notes."
)
REF_NOT_FOUND = (
    "refs.remove: no ref is exactly {ref}. Nothing was removed; copy the ref exactly as your "
    "scratchpad shows it."
)
ITEMS_NOT_LIST = "refs.set needs items (a list of strings)."

# ---------------------------------------------------------------------------
# Nudges (seed 003), each one line before the user's message
# ---------------------------------------------------------------------------
# How every hint begins (the scripted model tells the hints' block from the user's words by it).
HINT_OPENING = "[Hint: "
HINT_AFTER_TURNS = (
    "[Hint: {turns} turns have passed and your scratchpad is empty. Save your plan, key findings or "
    "references with session_scratchpad so they survive context compaction.]"
)
# The same hint after one turn (English needs its own sentence: "1 turn has passed").
HINT_AFTER_ONE_TURN = (
    "[Hint: 1 turn has passed and your scratchpad is empty. Save your plan, key findings or "
    "references with session_scratchpad so they survive context compaction.]"
)
HINT_PLAN_DETECTED = (
    "[Hint: Your last reply laid out a multi-step plan, but your scratchpad is empty. Save the plan "
    'with session_scratchpad (action "set_plan") so it survives context compaction.]'
)
HINT_AFTER_COMPACTION = (
    "[Hint: The conversation was just compacted: older messages were replaced by a summary. Check "
    "that your scratchpad holds your current plan and findings, and save anything you still need "
    "with session_scratchpad.]"
)
HINT_STALE = (
    "[Hint: Your scratchpad has not changed for {turns} turns. Check that it still matches your "
    "progress: update the plan, tighten the notes, remove refs you no longer need.]"
)
HINT_STALE_ONE_TURN = (
    "[Hint: Your scratchpad has not changed for 1 turn. Check that it still matches your "
    "progress: update the plan, tighten the notes, remove refs you no longer need.]"
)


def hint_after_turns(turns: int) -> str:
    return HINT_AFTER_ONE_TURN if turns == 1 else HINT_AFTER_TURNS.format(turns=turns)


def hint_stale(turns: int) -> str:
    return HINT_STALE_ONE_TURN if turns == 1 else HINT_STALE.format(turns=turns)
