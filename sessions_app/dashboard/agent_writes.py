"""The operator's changes of an agent's texts under the conflict rule: the version the operator
saw is checked under the agent's row lock, in the transaction that then calls the service, so a
change made meanwhile (by a session's model, a client or another operator) is never overwritten.

`services.agent_instructions_set` and `services.agent_version_restore` take no expected version
yet; when they do, these become plain calls of them.
"""

from __future__ import annotations

from django.db import transaction

from sessions_app import services
from sessions_app.models import Agent, AgentPart


class AgentChanged(Exception):
    """The part is no longer at the version the operator saw: its version and text now."""

    def __init__(self, version: int, text: str) -> None:
        super().__init__(version, text)
        self.version = version
        self.text = text


def _part_now(agent: Agent, part: str) -> tuple[int, str]:
    if part == AgentPart.INSTRUCTIONS:
        return agent.instructions_version, agent.instructions
    return agent.learned_version, agent.learned


def _locked_at(agent_id: int, part: str, base_version: int) -> None:
    """Inside the caller's transaction: the agent's row locked, its part at `base_version`
    (`AgentChanged` otherwise). `Agent.DoesNotExist` when it is gone."""
    agent = Agent.objects.select_for_update().get(pk=agent_id)
    version, text = _part_now(agent, part)
    if version != base_version:
        raise AgentChanged(version, text)


def agent_instructions_save(*, agent_id: int, instructions: str, base_version: int, author: str) -> Agent:
    """The instructions replaced as a new version, if they are still at `base_version` (the same
    text: no new version). `AgentChanged` otherwise; nothing changes then."""
    with transaction.atomic():
        _locked_at(agent_id, AgentPart.INSTRUCTIONS, base_version)
        return services.agent_instructions_set(agent_id=agent_id, instructions=instructions, author=author)


def agent_text_restore(*, agent_id: int, part: str, version: int, base_version: int, author: str) -> Agent:
    """Version `version` of the instructions or the learned text restored as a new version that
    names it, if the part is still at `base_version`. `AgentChanged` otherwise,
    `services.AgentVersionNotFound` for a version never written; nothing changes then."""
    with transaction.atomic():
        _locked_at(agent_id, part, base_version)
        return services.agent_version_restore(agent_id=agent_id, part=part, version=version, author=author)
