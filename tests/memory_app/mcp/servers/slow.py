"""A small MCP server over stdio that takes its time to start (the seconds in its first argument),
then offers one tool (written with the SDK's MCPServer)."""

from __future__ import annotations

import sys
import time

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)

from mcp.server.mcpserver import MCPServer  # noqa: E402 (after the wait, as a slow start is)

server = MCPServer("slow")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run()
