"""The agent's learned text: its own part of its system prompt (`edit_system_prompt`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.agent_models import Agent, AgentPart, AgentVersion
from sessions_app.common.text_edits import TextEdit, TextEditError, TextSubject, text_edit_apply
from sessions_app.services.agent_knowledge.common import agent_lock, agent_updated_emit

LEARNED_SUBJECT = TextSubject(
    name="the learned text",
    where_current=(
        "the current learned text follows (the copy in your system prompt may be older: it moves to "
        "the newest version at the session's next compaction)."
    ),
)
LEARNED_EMPTY = "(the learned text is empty)"


class AgentLearnedConflict(AgentKnowledgeError):
    """The learned text changed since the version an edit started from (an operator's edit names
    it); nothing was overwritten. Carries the current text and version to merge and try again."""

    def __init__(self, *, content: str, version: int) -> None:
        super().__init__(f"The learned text is at version {version} now; nothing was changed.")
        self.content = content
        self.version = version


def _learned_change(
    *,
    agent_id: int,
    author: str,
    max_chars: int,
    change: Callable[[str], str],
    session_id: uuid.UUID | None,
    expected_version: int | None,
) -> AgentVersion:
    with transaction.atomic():
        agent = agent_lock(agent_id, "learned", "learned_version")
        current = agent.learned or ""
        if expected_version is not None and expected_version != agent.learned_version:
            raise AgentLearnedConflict(content=current, version=agent.learned_version)
        try:
            content = change(current)
        except TextEditError as exc:
            raise AgentKnowledgeError(f"{exc}\n\n{current or LEARNED_EMPTY}") from None
        if len(content) > max_chars:
            raise AgentKnowledgeError(
                f"The learned text would be {len(content):,} characters, over its limit of "
                f"{max_chars:,} (the session setting knowledge.learned_max_chars), so nothing was "
                "changed. Condense it: replace or delete what no longer matters, or move detailed "
                "procedures into skills."
            )
        version = agent.learned_version + 1
        now = timezone.now()
        Agent.objects.filter(pk=agent_id).update(learned=content, learned_version=version, updated_at=now)
        row = AgentVersion.objects.create(
            agent_id=agent_id,
            part=AgentPart.LEARNED,
            name="",
            version=version,
            content=content,
            author=author,
            created_at=now,
        )
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.LEARNED,
            name="",
            version=version,
            author=author,
        )
    return row


def agent_learned_update(
    *,
    agent_id: int,
    edit: TextEdit,
    author: str,
    max_chars: int,
    session_id: uuid.UUID | None = None,
    expected_version: int | None = None,
) -> AgentVersion:
    """Apply one targeted edit (`edit_system_prompt`: update_notepad's operations,
    `common.text_edits`) to the agent's learned text as it is under the lock. Returns the new
    version's row (`learned_version` + 1).

    Raises `AgentKnowledgeError` (nothing changed) when the edit cannot apply (its message then
    ends with the current text, which the session's system prompt may show older) or the result
    is over `max_chars`; `AgentLearnedConflict` with a stale `expected_version`."""
    return _learned_change(
        agent_id=agent_id,
        author=author,
        max_chars=max_chars,
        change=lambda current: text_edit_apply(text=current, edit=edit, subject=LEARNED_SUBJECT),
        session_id=session_id,
        expected_version=expected_version,
    )


def agent_learned_write(
    *,
    agent_id: int,
    content: str,
    author: str,
    max_chars: int,
    session_id: uuid.UUID | None = None,
    expected_version: int | None = None,
) -> AgentVersion:
    """Replace the whole learned text (an operator's edit; "" clears it) as a new version; the
    rules of `agent_learned_update`."""
    return _learned_change(
        agent_id=agent_id,
        author=author,
        max_chars=max_chars,
        change=lambda current: content,
        session_id=session_id,
        expected_version=expected_version,
    )
