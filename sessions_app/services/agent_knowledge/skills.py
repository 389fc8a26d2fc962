"""An agent's skills (agentskills.io: a name, a description, a markdown body), each change a
version."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sessions_app.agent_knowledge_rules import (
    AgentKnowledgeError,
    AgentSkillConflict,
    skill_fields_check,
    skill_name_check,
)
from sessions_app.agent_knowledge_selectors import agent_skill_unknown_message
from sessions_app.agent_models import Agent, AgentPart, AgentSkill, AgentVersion
from sessions_app.services.agent_knowledge.common import agent_lock, agent_updated_emit


@dataclass(frozen=True)
class SkillFields:
    """A skill as written or imported: its name, description and markdown body."""

    name: str
    description: str
    content: str


def _skill_next_version(agent_id: int, name: str) -> int:
    # Versions of a name go on after a delete: its earlier versions are kept.
    latest = AgentVersion.objects.filter(agent_id=agent_id, part=AgentPart.SKILL, name=name).aggregate(
        latest=Max("version")
    )["latest"]
    return (latest or 0) + 1


def _skill_store(
    *, agent: Agent, skill: SkillFields, author: str, max_skills: int, expected_version: int | None = None
) -> AgentSkill:
    """Create or replace one skill of the locked `agent` (the caller holds the lock and the
    transaction)."""
    name, description, content = skill_fields_check(
        name=skill.name, description=skill.description, content=skill.content
    )
    existing = AgentSkill.objects.filter(agent_id=agent.pk, name=name).first()
    current = existing.version if existing is not None else 0
    if expected_version is not None and expected_version != current:
        now_at = "does not exist (version 0)" if existing is None else f"is at version {current}"
        raise AgentSkillConflict(
            f'The skill "{name}" {now_at}, not version {expected_version}, so nothing was written.',
            version=current,
        )
    if existing is None and AgentSkill.objects.filter(agent_id=agent.pk).count() >= max_skills:
        raise AgentKnowledgeError(
            f"The agent already has {max_skills} skills, the most it may have (the session setting "
            f'knowledge.max_skills), so "{name}" was not written. Delete a skill it no longer needs '
            "(delete_skill), or merge two into one."
        )
    version = _skill_next_version(agent.pk, name)
    now = timezone.now()
    AgentVersion.objects.create(
        agent_id=agent.pk,
        part=AgentPart.SKILL,
        name=name,
        version=version,
        content=content,
        extra={"description": description},
        author=author,
        created_at=now,
    )
    if existing is None:
        row = AgentSkill.objects.create(
            agent_id=agent.pk,
            name=name,
            description=description,
            content=content,
            version=version,
            updated_at=now,
        )
    else:
        existing.description, existing.content, existing.version, existing.updated_at = (
            description,
            content,
            version,
            now,
        )
        existing.save(update_fields=["description", "content", "version", "updated_at"])
        row = existing
    Agent.objects.filter(pk=agent.pk).update(updated_at=now)
    return row


def agent_skill_write(
    *,
    agent_id: int,
    name: str,
    description: str,
    content: str,
    author: str,
    max_skills: int,
    session_id: uuid.UUID | None = None,
    expected_version: int | None = None,
) -> AgentSkill:
    """Create the skill `name` or replace it (`write_skill`): a new version either way. Returns
    the skill's row. `AgentKnowledgeError` (nothing written) for a bad name (1-64: lowercase
    letters, digits and single hyphens, none at either end), a description not 1-1,024 characters,
    a body over 100,000, or a new skill past `max_skills`; `AgentSkillConflict` when
    `expected_version` is given (an operator's edit) and is not the skill's current version (0:
    it does not exist)."""
    with transaction.atomic():
        agent = agent_lock(agent_id)
        row = _skill_store(
            agent=agent,
            skill=SkillFields(name=name, description=description, content=content),
            author=author,
            max_skills=max_skills,
            expected_version=expected_version,
        )
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.SKILL,
            name=row.name,
            version=row.version,
            author=author,
        )
    return row


def agent_skill_delete(
    *,
    agent_id: int,
    name: str,
    author: str,
    session_id: uuid.UUID | None = None,
    expected_version: int | None = None,
) -> AgentVersion:
    """Delete the skill `name` (`delete_skill`): its row goes, its versions stay, and a version
    with `deleted` set records who deleted it. Returns that version. `AgentKnowledgeError` for an
    unknown skill; `AgentSkillConflict` when `expected_version` is given (an operator's delete
    names the version it saw) and is not the skill's current one."""
    with transaction.atomic():
        agent = agent_lock(agent_id)
        skill = AgentSkill.objects.filter(agent_id=agent_id, name=skill_name_check(name)).first()
        if skill is None:
            raise AgentKnowledgeError(agent_skill_unknown_message(agent_id=agent_id, name=name))
        if expected_version is not None and expected_version != skill.version:
            raise AgentSkillConflict(
                f'The skill "{name}" is at version {skill.version}, not version {expected_version}, '
                "so it was not deleted.",
                version=skill.version,
            )
        now = timezone.now()
        row = AgentVersion.objects.create(
            agent_id=agent_id,
            part=AgentPart.SKILL,
            name=name,
            version=_skill_next_version(agent_id, name),
            content="",
            extra={"description": skill.description},
            deleted=True,
            author=author,
            created_at=now,
        )
        skill.delete()
        Agent.objects.filter(pk=agent_id).update(updated_at=now)
        agent_updated_emit(
            session_id=session_id,
            agent=agent,
            part=AgentPart.SKILL,
            name=name,
            version=row.version,
            author=author,
        )
    return row


def agent_skills_import(
    *, agent_id: int, skills: Sequence[SkillFields], author: str, max_skills: int
) -> list[AgentSkill]:
    """Write every skill of `skills` (an operator's import of `SKILL.md` files), each a new
    version, in one transaction: a skill that breaks a rule (its message names it), two skills
    of one name, or more than `max_skills` in the end raise `AgentKnowledgeError`, and nothing of
    the import is written. Returns the skills' rows in the given order."""
    names = [skill.name for skill in skills]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise AgentKnowledgeError(f"Two skills of the import have the same name: {', '.join(twice)}.")
    with transaction.atomic():
        agent = agent_lock(agent_id)
        return [
            _skill_store(agent=agent, skill=skill, author=author, max_skills=max_skills) for skill in skills
        ]
