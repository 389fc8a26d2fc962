"""An agent's lasting key-value store (`agent_state`): read on demand, never in the prompt."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from sessions_app.agent_knowledge_rules import (
    STATE_MAX_KEYS,
    AgentKnowledgeError,
    AgentStateConflict,
    state_key_check,
    state_value_check,
)
from sessions_app.agent_models import AgentStateEntry
from sessions_app.services.agent_knowledge.common import agent_lock, agent_updated_emit

STATE_PART = "state"


def agent_state_set(
    *,
    agent_id: int,
    key: str,
    value: Any,
    author: str,
    expected_version: int | None = None,
    session_id: uuid.UUID | None = None,
) -> AgentStateEntry:
    """Set `key` to `value` (any JSON): version 1 for a new key, else the key's version + 1.
    Returns the entry. Every session of the agent reads the new value at once.

    `AgentKnowledgeError` (nothing written) for a key not 1-200 characters, a value over 65,536
    bytes of JSON, or a new key past 1,000 keys; `AgentStateConflict` when `expected_version` is
    given and is not the key's current version (0 stands for "the key does not exist")."""
    key = state_key_check(key)
    state_value_check(value)
    with transaction.atomic():
        # The agent's row lock, not the entry's: a new key has no row to lock yet, and the count
        # of keys must be exact. Sets of one agent queue, so a key's versions strictly increase.
        agent = agent_lock(agent_id)
        entry = AgentStateEntry.objects.filter(agent_id=agent_id, key=key).first()
        current = entry.version if entry is not None else 0
        if expected_version is not None and expected_version != current:
            now_at = "does not exist (version 0)" if entry is None else f"is at version {current}"
            raise AgentStateConflict(
                f'The key "{key}" {now_at}, not version {expected_version}, so nothing was changed. '
                "Get it again and decide from its current value.",
                version=current,
            )
        now = timezone.now()
        if entry is None:
            if AgentStateEntry.objects.filter(agent_id=agent_id).count() >= STATE_MAX_KEYS:
                raise AgentKnowledgeError(
                    f"The agent's state already holds {STATE_MAX_KEYS:,} keys, the most it may "
                    f'(STATE_MAX_KEYS), so "{key}" was not set. Delete keys it no longer needs, or '
                    "keep related values together under one key."
                )
            entry = AgentStateEntry.objects.create(
                agent_id=agent_id, key=key, value=value, version=1, author=author, updated_at=now
            )
        else:
            entry.value, entry.version, entry.author, entry.updated_at = value, entry.version + 1, author, now
            entry.save(update_fields=["value", "version", "author", "updated_at"])
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=STATE_PART,
            name=key,
            version=entry.version,
            author=author,
        )
    return entry


def agent_state_delete(
    *,
    agent_id: int,
    key: str,
    author: str,
    session_id: uuid.UUID | None = None,
    expected_version: int | None = None,
) -> None:
    """Delete `key`. `AgentKnowledgeError` for a key that does not exist; `AgentStateConflict`
    when `expected_version` is given (an operator's delete names the version it saw) and is not
    the key's current one. Its `agent.updated` has `version` null: the key has no version any
    more (a later set starts again at 1)."""
    key = state_key_check(key)
    with transaction.atomic():
        agent = agent_lock(agent_id)
        entries = AgentStateEntry.objects.filter(agent_id=agent_id, key=key)
        if expected_version is not None:
            current = entries.values_list("version", flat=True).first()
            if current is not None and current != expected_version:
                raise AgentStateConflict(
                    f'The key "{key}" is at version {current}, not version {expected_version}, so it '
                    "was not deleted.",
                    version=current,
                )
        deleted, _ = entries.delete()
        if not deleted:
            raise AgentKnowledgeError(
                f'The agent\'s state has no key "{key}", so nothing was deleted (list its keys with '
                'action "list").'
            )
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=STATE_PART,
            name=key,
            version=None,
            author=author,
        )
