"""Who made a change to a session's memory, as revisions and `*.updated` events name them
(PROTOCOL.md): the session's own agent, or an operator by username."""

from __future__ import annotations

AGENT_AUTHOR = "agent"
OPERATOR_AUTHOR_PREFIX = "operator:"


def operator_author(username: str) -> str:
    """The author of an operator's edit (the dashboard's or the admin's): `operator:<username>`."""
    return f"{OPERATOR_AUTHOR_PREFIX}{username}"
