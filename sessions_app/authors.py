"""Who made a change to a session's memory, as revisions and `*.updated` events name them
(PROTOCOL.md): the session's own agent, or an operator by username."""

from __future__ import annotations

AGENT_AUTHOR = "agent"
OPERATOR_AUTHOR_PREFIX = "operator:"


def operator_author(username: str) -> str:
    """The author of an operator's edit (the dashboard's or the admin's): `operator:<username>`."""
    return f"{OPERATOR_AUTHOR_PREFIX}{username}"


# An agent's knowledge (DESIGN.md, "Agents: Versions"): the session whose model made a change, or
# the client (by its token's name) that created or changed the agent.
AGENT_SESSION_AUTHOR_PREFIX = "agent:"
CLIENT_AUTHOR_PREFIX = "client:"


def agent_session_author(session_id: object) -> str:
    """The author of a change a session's model made to its agent: `agent:<session id>`."""
    return f"{AGENT_SESSION_AUTHOR_PREFIX}{session_id}"


def client_author(token_name: str) -> str:
    """The author of a change a client made through the protocol: `client:<token name>`."""
    return f"{CLIENT_AUTHOR_PREFIX}{token_name}"
