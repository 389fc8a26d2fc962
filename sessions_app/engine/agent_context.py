"""What a session of an agent is shown of its knowledge (DESIGN.md, "Agents"): the agent's
instructions before the session's own system prompt, then `## Learned Instructions` and
`## Skills` after the features' guidance, pinned for the epoch (`AgentSession.context_pins`, under
`AGENT_PIN`) unless `knowledge.refresh` is `immediate`: an edit then never rewrites a running
session's cached prefix before its next compaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions_app import agent_selectors
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.prompts import LEARNED_EMPTY_HINT, LEARNED_HEADING, SKILLS_HEADING, SKILLS_READ_LINE

# The name the agent's knowledge is pinned under in `AgentSession.context_pins` (no feature's).
AGENT_PIN = "agent"


@dataclass(frozen=True)
class AgentTexts:
    """The agent's parts of a request's system prompt: `lead` before the session's own system
    prompt, `sections` after the features' guidance; `pins_new` when they were read now to be
    pinned for the epoch."""

    lead: list[str]
    sections: list[str]
    pins_new: list[str] | None


def _setting(session: SessionSnapshot, key: str, default: Any) -> Any:
    try:
        return session.setting("knowledge", key)
    except KeyError:  # the knowledge feature is not loaded: its defaults
        return default


def agent_texts(session: SessionSnapshot) -> AgentTexts | None:
    """What the session's agent shows in this request (runs in a DB thread), None without one."""
    if session.agent_id is None:
        return None
    immediate = _setting(session, "refresh", "compaction") == "immediate"
    pinned = None if immediate else session.pinned(AGENT_PIN)
    if pinned is not None and len(pinned) == 3:
        instructions, learned, skills = pinned
        fresh = None
    else:
        instructions, learned, skills = _texts_now(session)
        fresh = None if immediate else [instructions, learned, skills]
    return AgentTexts(
        lead=[instructions] if instructions else [],
        sections=[text for text in (learned, skills) if text],
        pins_new=fresh,
    )


def _texts_now(session: SessionSnapshot) -> tuple[str, str, str]:
    assert session.agent_id is not None
    agent, skills = agent_selectors.agent_knowledge(agent_id=session.agent_id)
    learned = ""
    if agent.learned:
        # Its trailing newlines are no part of what it says (appends end with one): the next
        # section follows after one blank line, as everywhere in the system prompt.
        learned = f"{LEARNED_HEADING}\n{agent.learned.rstrip(chr(10))}"
    elif _setting(session, "learned_editable", True):
        learned = f"{LEARNED_HEADING}\n{LEARNED_EMPTY_HINT}"
    skills_text = ""
    if skills:
        lines = [f"- {name}: {description}" for name, description in skills]
        skills_text = "\n".join([SKILLS_HEADING, *lines, SKILLS_READ_LINE])
    return agent.instructions, learned, skills_text
