"""Texts the agent sees about sub-sessions (seed 000: `spawn_session`, `fork_session`,
`report_result`; their contract is DESIGN.md's), kept in one place so they are found and changed once.

The seed names the tools and says what they are for; it gives no wording, so these are ours.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Tool descriptions
# ---------------------------------------------------------------------------
SPAWN_SESSION_DESCRIPTION = (
    "Delegate a task to a new sub-session and wait for its result. The child has your model, system prompt and "
    "tools, and works on `task` (its first user message) in a context of its own: it sees nothing of this "
    "conversation, so write `task` to stand alone. Its notepad starts empty (a copy of yours with "
    "copy_notepad: true); its scratchpad starts empty. Returns {session_id, status, result}: status "
    '"reported" with the text the child sent with report_result; "no_report" with its last message when it '
    'ended without reporting; "failed", "cancelled", "max_steps" or "budget_reached" (a spending budget '
    "stopped it) with what it had. Several calls in one step run their children at the same time."
)
FORK_SESSION_DESCRIPTION = (
    "Fork this session and wait for the fork's result: a child session that starts with a copy of this "
    "conversation (up to your previous step), of your notepad and of your scratchpad, then works on `task` "
    "(its next user message) on its own branch. Use it for side work that needs what you already know. "
    "Nothing the fork does changes this session. Returns {session_id, status, result} as spawn_session does. "
    "Several calls in one step run their forks at the same time."
)
REPORT_RESULT_DESCRIPTION = (
    "Send your result to the session that started you, and end your turn. `result` is all the parent "
    "receives (your notepad is not sent): make it a clean, self-contained answer to your task. Call it once, "
    "when the task is done."
)

TASK_DESCRIPTION = "The child's first user message: the whole task, written so that it stands alone."
FORK_TASK_DESCRIPTION = "The fork's next user message: what it should do on its branch."
TITLE_DESCRIPTION = "A short title for the sub-session, shown to operators."
COPY_NOTEPAD_DESCRIPTION = "Start the child with a copy of your notepad. Default: false."
RESULT_DESCRIPTION = "Your answer to the task, for the parent session."

# ---------------------------------------------------------------------------
# Guidance in a child's stable system prompt (children only: a root's prompt is unchanged)
# ---------------------------------------------------------------------------
CHILD_GUIDANCE = (
    "You are a sub-session: another session started you to do one task, given as the user's message. "
    "When the task is done, call report_result with a clean, self-contained answer; that text is all the "
    "session that started you receives. Ending your turn without report_result returns only your last message."
)

# ---------------------------------------------------------------------------
# Errors the model reads (a tool_result with is_error; nothing changed)
# ---------------------------------------------------------------------------
TASK_MISSING = (
    '{tool} needs "task": a non-empty string, the child\'s first user message. Nothing was started.'
)
DEPTH_LIMIT = (
    "This session is at depth {depth}, the deepest sub-sessions may go (subsessions.max_depth is {max_depth}), "
    "so it cannot start sub-sessions. Do the work here."
)
FORK_TOO_LARGE = (
    "fork_session would copy {tokens:,} tokens of this conversation, and a fork may copy at most "
    "{limit:,} ({limit_source}). Nothing was started. Use spawn_session instead, with a task that carries "
    "what the child needs (the facts, names and paths it must know, written out), or put that in your "
    "notepad and spawn with copy_notepad: true."
)
FORK_LIMIT_SESSION = "subsessions.fork_max_tokens"
FORK_LIMIT_SERVICE = (
    "the service's ceiling; this session's subsessions.fork_max_tokens of {setting:,} cannot raise it"
)
# The fan-out limits (`services.subsession_bound`): `why` says which setting or ceiling sets it.
STEP_LIMIT = (
    "This is spawn/fork call {number} of this step, and one step may start at most {limit} sub-sessions "
    "({why}), so this call started nothing. Wait for the results of the first {limit}, then delegate the "
    "rest in a later step, or do this work here."
)
TREE_LIMIT = (
    "This tree of sessions already holds {count} sub-sessions, the most one tree may hold ({why}), so nothing "
    "was started; a sub-session keeps its place after it ends. Use the results you have and do this work here."
)
CLIENT_LIMIT = (
    "This client already has {count} sub-sessions running or started in the last minute, the most it may have "
    "({why}), so nothing was started. Wait for the running ones to end and try again, or do this work here."
)
QUOTA_LIMIT = (
    "This client has created {limit} sessions in the last minute, the most it may create a minute "
    "(PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE is {limit}; sub-sessions count), so nothing was started. Do this "
    "work here, or delegate it in a minute."
)
BOUND_BY_SETTING = "subsessions.{key} is {value}"
BOUND_BY_CEILING = (
    "the service's ceiling {ceiling_name} is {ceiling}; subsessions.{key} ({value}) cannot raise it"
)
TOKEN_REVOKED = "This client's token was revoked, so no sub-session was started; this turn is ending."
START_FAILED = "The sub-session could not begin its turn, so none was kept: {reason}"
DISABLED = "Sub-sessions are switched off in this session (subsessions.enabled is false). Do the work here."
REPORT_NOT_A_CHILD = (
    "report_result is for sub-sessions, and this session has no parent. Answer the user directly."
)
REPORT_MISSING = 'report_result needs "result": a non-empty string, the answer your parent receives.'

# ---------------------------------------------------------------------------
# The scripted model
# ---------------------------------------------------------------------------
SCRIPTED_DELEGATING = "Delegating that to a sub-session."
SCRIPTED_FORKING = "Forking this session for that."
SCRIPTED_CANNOT_DELEGATE = "I cannot start sub-sessions in this session."
