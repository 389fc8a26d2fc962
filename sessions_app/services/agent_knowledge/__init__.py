"""Every change of an agent's knowledge by its sessions, its operators or its client (DESIGN.md,
"Agents: what outlives a session"): the learned text (`edit_system_prompt`), skills, state, and
authored tools (whose operator switch, `agent_tool_enable`, is the one change that is no version).

Rules that hold for every service here:
- The agent's row is locked (`select_for_update`) for the whole change, so changes of one agent
  queue: each applies to what the previous one left, counts are exact, and version numbers
  strictly increase. (SQLite has no row locks; its IMMEDIATE transactions serialize writers.)
- The learned text and skills are never changed in place without a version: each change is an
  `AgentVersion` row (author, time, content); a deleted skill is a version with `deleted` set.
- A change made by a session (`session_id` given) emits `agent.updated` on that session
  (`agent`, `part`, `name`, `version`, `author`) in the same transaction, announced after commit.
- A change that breaks a rule raises `AgentKnowledgeError` (its message is for the editor, the
  model included) and nothing is written.
"""

from __future__ import annotations

from sessions_app.services.agent_knowledge.learned import (
    AgentLearnedConflict,
    agent_learned_update,
    agent_learned_write,
)
from sessions_app.services.agent_knowledge.skills import (
    SkillFields,
    agent_skill_delete,
    agent_skill_write,
    agent_skills_import,
)
from sessions_app.services.agent_knowledge.state import agent_state_delete, agent_state_set
from sessions_app.services.agent_knowledge.tools import (
    agent_tool_define,
    agent_tool_enable,
    agent_tool_remove,
    agent_tool_restore,
)

__all__ = [
    "AgentLearnedConflict",
    "SkillFields",
    "agent_learned_update",
    "agent_learned_write",
    "agent_skill_delete",
    "agent_skill_write",
    "agent_skills_import",
    "agent_state_delete",
    "agent_state_set",
    "agent_tool_define",
    "agent_tool_enable",
    "agent_tool_remove",
    "agent_tool_restore",
]
