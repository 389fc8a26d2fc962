"""An agent's knowledge limits as its sessions have them: the `knowledge` settings' defaults
(the features' own, read from the ordered list, never by name) under the agent's settings. An
operator's edit (the dashboard) and a client's (the HTTP API) keep the limits the agent's
sessions keep."""

from __future__ import annotations

from sessions_app.engine.features import features
from sessions_app.models import Agent

# DESIGN.md's defaults, for a server whose feature list has no `knowledge` settings.
LEARNED_MAX_CHARS_DEFAULT = 8_000
MAX_SKILLS_DEFAULT = 64


def agent_knowledge_limit(agent: Agent, key: str, default: int) -> int:
    """The agent's `knowledge.<key>`: its own setting, else the features' default, else `default`."""
    defaults = features().default_settings.get("knowledge") or {}
    own = agent.settings.get("knowledge") if isinstance(agent.settings, dict) else None
    value = (own if isinstance(own, dict) else {}).get(key, defaults.get(key, default))
    return int(value)


def learned_max_chars(agent: Agent) -> int:
    return agent_knowledge_limit(agent, "learned_max_chars", LEARNED_MAX_CHARS_DEFAULT)


def max_skills(agent: Agent) -> int:
    return agent_knowledge_limit(agent, "max_skills", MAX_SKILLS_DEFAULT)
