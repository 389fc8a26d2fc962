"""The rules and limits of an agent's knowledge (DESIGN.md, "Agents: what outlives a session"):
skills in the agentskills.io format and the `agent_state` store. Shared by the services that
write them, the selectors that read them, the knowledge feature's tools and the skill files'
import, so each rule is written once. Every check raises `AgentKnowledgeError` with a message
for whoever made the change (the model included) to act on.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Skills (agentskills.io): a name, a description, a markdown body.
SKILL_NAME_MAX_CHARS = 64
SKILL_DESCRIPTION_MAX_CHARS = 1_024
SKILL_CONTENT_MAX_CHARS = 100_000
# Lowercase letters and digits in runs joined by single hyphens: none at either end, no "--".
SKILL_NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# `agent_state`: the agent's lasting key-value store.
STATE_KEY_MAX_CHARS = 200
STATE_VALUE_MAX_BYTES = 65_536
STATE_MAX_KEYS = 1_000
STATE_LIST_MAX_KEYS = 200


class AgentKnowledgeError(ValueError):
    """A change or read of an agent's knowledge that cannot be made (a bad name, a limit, an
    unknown skill or key): nothing changed. The message says what to do instead."""


class AgentStateConflict(AgentKnowledgeError):
    """`agent_state` set with an `expected_version` that is not the key's current version."""

    def __init__(self, message: str, *, version: int | None) -> None:
        super().__init__(message)
        self.version = version


class AgentSkillConflict(AgentKnowledgeError):
    """A skill written with an `expected_version` (an operator's edit names the version it
    started from) that is not its current one: nothing was overwritten."""

    def __init__(self, message: str, *, version: int | None) -> None:
        super().__init__(message)
        self.version = version


def skill_name_check(name: Any) -> str:
    """`name` if it is a valid skill name, else `AgentKnowledgeError`."""
    if not isinstance(name, str) or not name:
        raise AgentKnowledgeError("A skill needs a name (1-64 characters).")
    if len(name) > SKILL_NAME_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The skill name "{name[:80]}" is {len(name)} characters long; at most '
            f"{SKILL_NAME_MAX_CHARS} (SKILL_NAME_MAX_CHARS)."
        )
    if not SKILL_NAME_RE.fullmatch(name):
        raise AgentKnowledgeError(
            f'"{name}" is not a valid skill name: use lowercase letters, digits and single hyphens, '
            'with no hyphen at either end (e.g. "weekly-report").'
        )
    return name


def skill_fields_check(*, name: Any, description: Any, content: Any) -> tuple[str, str, str]:
    """A skill's name, description and body if they keep the rules, else `AgentKnowledgeError`."""
    name = skill_name_check(name)
    if not isinstance(description, str) or not description.strip():
        raise AgentKnowledgeError(f'The skill "{name}" needs a description (1-1,024 characters).')
    if len(description) > SKILL_DESCRIPTION_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The description of the skill "{name}" is {len(description):,} characters long; at most '
            f"{SKILL_DESCRIPTION_MAX_CHARS:,} (SKILL_DESCRIPTION_MAX_CHARS). Shorten it: it is shown "
            "in every session's ## Skills list; the details belong in the body."
        )
    if not isinstance(content, str):
        raise AgentKnowledgeError(f'The body of the skill "{name}" must be text (markdown).')
    if len(content) > SKILL_CONTENT_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The body of the skill "{name}" is {len(content):,} characters long; at most '
            f"{SKILL_CONTENT_MAX_CHARS:,} (SKILL_CONTENT_MAX_CHARS). Split it into smaller skills."
        )
    return name, description, content


def state_key_check(key: Any) -> str:
    """`key` if it is a valid `agent_state` key (1-200 characters), else `AgentKnowledgeError`."""
    if not isinstance(key, str) or not key:
        raise AgentKnowledgeError('agent_state needs a "key" (1-200 characters) for this action.')
    if len(key) > STATE_KEY_MAX_CHARS:
        raise AgentKnowledgeError(
            f"The key is {len(key)} characters long; at most {STATE_KEY_MAX_CHARS} (STATE_KEY_MAX_CHARS)."
        )
    return key


def state_value_check(value: Any) -> None:
    """`AgentKnowledgeError` unless `value` is JSON of at most `STATE_VALUE_MAX_BYTES` bytes."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise AgentKnowledgeError(f"The value is not JSON: {exc}.") from None
    if len(encoded) > STATE_VALUE_MAX_BYTES:
        raise AgentKnowledgeError(
            f"The value is {len(encoded):,} bytes of JSON; at most {STATE_VALUE_MAX_BYTES:,} "
            "(STATE_VALUE_MAX_BYTES). Split it over several keys, or keep a summary."
        )
