"""Every text the model reads about the agent's knowledge tools, in one place: their
descriptions and schemas (DESIGN.md, "Agents"), what their results say about when a change
takes effect, and what a session without an agent is told."""

from __future__ import annotations

from typing import Any

from sessions_app.common.text_edits import TEXT_EDIT_SCHEMA

EDIT_SYSTEM_PROMPT = "edit_system_prompt"
READ_SKILL = "read_skill"
WRITE_SKILL = "write_skill"
DELETE_SKILL = "delete_skill"
AGENT_STATE = "agent_state"

# Seed 000: `update_notepad` makes "the same operations as `edit_system_prompt`"; DESIGN.md gives
# edit_system_prompt update_notepad's schema, so it is that schema, unchanged.
EDIT_SYSTEM_PROMPT_SCHEMA: dict[str, Any] = TEXT_EDIT_SCHEMA
EDIT_SYSTEM_PROMPT_DESCRIPTION = (
    "Edit your learned instructions: your own part of your system prompt (## Learned Instructions), "
    "which every future session of this agent starts with. Keep lasting instructions and observations "
    "there, not the current task's working notes (those go in the session notepad). The operations are "
    "update_notepad's: find_replace replaces the first occurrence of `find` with `replace` (every "
    "occurrence with replace_all: true); append and prepend add `content` exactly as given (include your "
    "own newlines); delete removes every occurrence of `content`. Text that does not occur, or a result "
    'over the size limit, is an error and nothing changes. Returns {"ok": true, "version"}.'
)

SKILL_NAME_PROPERTY: dict[str, Any] = {
    "type": "string",
    "description": "The skill's name: lowercase letters, digits and single hyphens (e.g. weekly-report)",
}
READ_SKILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": SKILL_NAME_PROPERTY},
    "required": ["name"],
}
READ_SKILL_DESCRIPTION = (
    "Read one of your skills in full (## Skills lists them). Returns "
    '{"name", "description", "content"}: content is the skill\'s markdown body.'
)
WRITE_SKILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": SKILL_NAME_PROPERTY,
        "description": {
            "type": "string",
            "description": "One line (at most 1,024 characters): what the skill does and when to use it",
        },
        "content": {"type": "string", "description": "The skill's body: markdown instructions"},
    },
    "required": ["name", "description", "content"],
}
WRITE_SKILL_DESCRIPTION = (
    "Create a skill, or replace the skill of that name: reusable knowledge (a procedure, a checklist, "
    "what you learned doing a task) that every session of this agent sees listed under ## Skills and "
    "can read in full with read_skill. Each write is a new version; earlier versions are kept. "
    'Returns {"ok": true, "version"}.'
)
DELETE_SKILL_SCHEMA: dict[str, Any] = READ_SKILL_SCHEMA
DELETE_SKILL_DESCRIPTION = (
    'Delete one of your skills (its earlier versions are kept for the operators). Returns {"ok": true}.'
)

AGENT_STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["get", "set", "delete", "list"],
            "description": "What to do",
        },
        "key": {"type": "string", "description": "For get, set and delete: the key (1-200 characters)"},
        "value": {"description": "For set: the value, any JSON (at most 65,536 bytes)"},
        "prefix": {"type": "string", "description": "For list: only the keys that start with it"},
        "expected_version": {
            "type": "integer",
            "minimum": 0,
            "description": (
                "For set: change the key only if it is at this version (0: only if it does not exist)"
            ),
        },
    },
    "required": ["action"],
}
AGENT_STATE_DESCRIPTION = (
    "Your lasting key-value store, shared by every session of this agent and never shown in your "
    'prompt: read it when you need it. get → {"key", "value", "version"}; set → {"ok": true, '
    '"version"} (with expected_version, only if the key is still at that version); delete → '
    '{"ok": true}; list → {"keys": [...]}, sorted, filtered by prefix, at most 200.'
)

# What a result says about when a change reaches the system prompt (DESIGN.md: "The tool results
# say when an edit takes effect").
TAKES_EFFECT_AT_COMPACTION = (
    "Saved. This session's system prompt shows the change from its next compaction (until then it "
    "keeps the version it started this part of the conversation with); every new session of this "
    "agent starts with it."
)
TAKES_EFFECT_NOW = "Saved. Your system prompt shows the change from your next model call."
SKILL_READABLE_NOW = " read_skill returns the new text already."

# A call of one of these tools in a session without an agent (or with the tool switched off).
NO_AGENT = (
    "This session has no agent, so it has no learned instructions, skills or agent state: those "
    "belong to an agent and outlive its sessions. Use the session notepad for this session's notes."
)
LEARNED_NOT_EDITABLE = (
    "Your learned instructions are not editable in this session (knowledge.learned_editable is off)."
)
SKILLS_NOT_WRITABLE = "Your skills are read-only in this session (knowledge.skills_writable is off)."
