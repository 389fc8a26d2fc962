"""The bounds on what an MCP server may make this service hold or wait for, so that a hostile or
broken server cannot grow memory or stall a turn without bound. The timeouts of a call and of a
start are settings (`PALIMPSEST_MCP_CALL_TIMEOUT_SECONDS`, `PALIMPSEST_MCP_START_TIMEOUT_SECONDS`)."""

from __future__ import annotations

# Tools kept of one server's listing: the rest are left out (the dashboard says how many).
MCP_TOOLS_MAX = 128
# Pages of a cursored `tools/list` followed before the listing is taken as it stands.
MCP_LIST_PAGES_MAX = 10
# A tool whose input schema's JSON is larger is left out (it would be in every request).
MCP_SCHEMA_MAX_BYTES = 16 * 1024
# A tool's description is clipped to this many characters.
MCP_DESCRIPTION_MAX_CHARS = 2000
# What of one call's result is kept: text past this is cut with a note, before offload stores
# the rest of a large result (the SDK reads a whole message first; one SSE event is bounded by
# MCP_MESSAGE_MAX_BYTES for streamable HTTP).
MCP_RESULT_MAX_BYTES = 4 * 1024 * 1024
MCP_MESSAGE_MAX_BYTES = 8 * 1024 * 1024
# An image larger than this (its base64 text) becomes a note instead.
MCP_IMAGE_MAX_BYTES = 4 * 1024 * 1024
# The media types a model accepts as an image block.
MCP_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Restart after a failure: the first at once (a crash costs one call), then waiting this long,
# doubled each time up to the most, until a start succeeds.
MCP_RESTART_FIRST_DELAY_SECONDS = 1.0
MCP_RESTART_MAX_DELAY_SECONDS = 60.0
# The most characters of a server's error kept for the dashboard.
MCP_ERROR_MAX_CHARS = 500
# A tool name's longest form (the providers' rule `^[a-zA-Z0-9_-]{1,64}$`).
TOOL_NAME_MAX_CHARS = 64
