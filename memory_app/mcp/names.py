"""An MCP tool's name as the model sees it: `mcp__<server>__<tool>`, within the providers' rule
`^[a-zA-Z0-9_-]{1,64}$`. Characters outside it become `_`; a name still too long keeps its start
and ends with a short digest of the whole, so that it stays the same across listings and
processes and two long names of one server do not collide."""

from __future__ import annotations

import hashlib
import re

from memory_app.mcp.limits import TOOL_NAME_MAX_CHARS

PREFIX = "mcp__"
SEPARATOR = "__"
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")
_DIGEST_CHARS = 8


def mcp_tool_name(server: str, tool: str) -> str:
    """The offered name of `server`'s tool `tool`."""
    name = PREFIX + server + SEPARATOR + _OUTSIDE.sub("_", tool)
    if len(name) <= TOOL_NAME_MAX_CHARS:
        return name
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:_DIGEST_CHARS]
    return name[: TOOL_NAME_MAX_CHARS - _DIGEST_CHARS - 1] + "_" + digest
