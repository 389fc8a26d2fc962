"""What the skill commands share: the agent an operator names (`NAME [--client CLIENT]`)."""

from __future__ import annotations

from django.core.management.base import CommandError

from sessions_app.agent_knowledge_selectors import agents_named
from sessions_app.agent_models import Agent


def agent_named(name: str, client: str | None) -> Agent:
    """The agent `name` (of `client` when given: its token's name, "" for the operators'); a
    `CommandError` when there is none, or when two clients have one of that name and no
    `--client` says which."""
    agents = agents_named(name=name, owner_name=client)
    if not agents:
        whose = f" of the client {client!r}" if client is not None else ""
        raise CommandError(f"No agent named {name!r}{whose}.")
    if len(agents) > 1:
        owners = ", ".join(repr(a.owner_name) for a in agents)
        raise CommandError(
            f"Several clients have an agent named {name!r} ({owners}): name one with --client."
        )
    return agents[0]
