"""Writes of agents (DESIGN.md, "Agents"): creating one, its instructions, restoring a version.
Every change is a new `AgentVersion` with its author; nothing is edited in place without one.
The values are checked by the caller (`engine.agents`: the name, the model, the settings)."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions_app.models import Agent, AgentPart, AgentVersion
from sessions_app.validation import SettingsSchema, settings_clean, settings_overlay

# Versions an operator can restore here; a skill's restore belongs with the skills.
RESTORABLE_PARTS = (AgentPart.INSTRUCTIONS, AgentPart.LEARNED)


class AgentExists(Exception):
    """The owner has an agent of that name already."""


class AgentVersionNotFound(Exception):
    """No such version of that part of the agent."""


class AgentTextConflict(Exception):
    """The instructions or the learned text are no longer at the version a change started from
    (`expected_version`): nothing was changed. Carries the part's version and text now, to merge
    and try again."""

    def __init__(self, *, part: str, version: int, text: str) -> None:
        super().__init__(f"The agent's {part} text is at version {version} now; nothing was changed.")
        self.part = part
        self.version = version
        self.text = text


def agent_insert(
    *, owner_name: str, name: str, instructions: str, model: str, settings: dict, author: str
) -> Agent:
    """A new agent with its instructions as their version 1 (its learned text is empty, version
    0 until written). `AgentExists` when its owner has one of that name."""
    try:
        with transaction.atomic():
            agent = Agent.objects.create(
                owner_name=owner_name,
                name=name,
                instructions=instructions,
                instructions_version=1,
                model=model,
                settings=settings,
            )
            AgentVersion.objects.create(
                agent=agent, part=AgentPart.INSTRUCTIONS, version=1, content=instructions, author=author
            )
    except IntegrityError:
        if Agent.objects.filter(owner_name=owner_name, name=name).exists():
            raise AgentExists(f"an agent named {name!r} exists already") from None
        raise
    return agent


def agent_defaults_set(
    *, agent_id: int, model: str | None, settings: dict | None, schema: SettingsSchema
) -> Agent:
    """The model and settings the agent's sessions start from (None: unchanged). `settings` are
    laid over the agent's own as given (`settings_overlay`: its sessions still get the defaults
    of their own day under them) and the result is checked against `schema` (the features'
    rules) under the agent's row lock: `validation.SpecError` for a bad one, nothing changed.
    Neither is a versioned part: the change is in place, as an operator's edit of them is."""
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        fields = ["updated_at"]
        if settings is not None:
            merged = settings_overlay(agent.settings or {}, settings)
            settings_clean(merged, schema=schema)
            agent.settings = merged
            fields.append("settings")
        if model is not None:
            agent.model = model
            fields.append("model")
        agent.updated_at = timezone.now()
        agent.save(update_fields=fields)
    return agent


def agent_delete(*, agent_id: int) -> None:
    """Delete the agent with its versions, skills, state and authored tools (their rows
    cascade). Its sessions are kept by a `PROTECT` key, so the caller deletes them first in the
    same transaction (`engine.agents.agent_delete`); `ProtectedError` while any is left.
    `Agent.DoesNotExist` when there is no such agent."""
    Agent.objects.get(pk=agent_id).delete()


def _expect(agent: Agent, part: str, expected_version: int | None) -> None:
    """Under the agent's row lock: `AgentTextConflict` unless the part is at `expected_version`
    (None: any version)."""
    version, text = (
        (agent.instructions_version, agent.instructions)
        if part == AgentPart.INSTRUCTIONS
        else (agent.learned_version, agent.learned or "")
    )
    if expected_version is not None and expected_version != version:
        raise AgentTextConflict(part=part, version=version, text=text)


def agent_instructions_set(
    *, agent_id: int, instructions: str, author: str, expected_version: int | None = None
) -> Agent:
    """The agent's instructions replaced, as a new version (unchanged text: no new version).
    With `expected_version` (the version an editor opened at), `AgentTextConflict` when they are
    at another one now; nothing changes then."""
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        _expect(agent, AgentPart.INSTRUCTIONS, expected_version)
        if agent.instructions == instructions:
            return agent
        return _text_part_set(agent, AgentPart.INSTRUCTIONS, instructions, author=author)


def agent_version_restore(
    *, agent_id: int, part: str, version: int, author: str, expected_version: int | None = None
) -> Agent:
    """The instructions or the learned text as they were at `version`, as a new version that
    names it (`restored_from`). `AgentVersionNotFound` when there is no such version;
    `AgentTextConflict` when `expected_version` is given and the part is at another version now
    (a change made meanwhile is never overwritten). Nothing changes on either."""
    if part not in RESTORABLE_PARTS:
        raise AgentVersionNotFound(f"{part!r} versions are not restored here")
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        _expect(agent, part, expected_version)
        old = AgentVersion.objects.filter(agent=agent, part=part, name="", version=version).first()
        if old is None:
            raise AgentVersionNotFound(f"no version {version} of the {part}")
        return _text_part_set(agent, part, old.content, author=author, restored_from=version)


def _text_part_set(
    agent: Agent, part: str, text: str, *, author: str, restored_from: int | None = None
) -> Agent:
    """Under the agent's row lock (the caller's): the part's text and version number, and its
    version row."""
    field, counter = (
        ("instructions", "instructions_version")
        if part == AgentPart.INSTRUCTIONS
        else (
            "learned",
            "learned_version",
        )
    )
    version = getattr(agent, counter) + 1
    setattr(agent, field, text)
    setattr(agent, counter, version)
    agent.updated_at = timezone.now()
    agent.save(update_fields=[field, counter, "updated_at"])
    AgentVersion.objects.create(
        agent=agent, part=part, version=version, content=text, author=author, restored_from=restored_from
    )
    return agent
