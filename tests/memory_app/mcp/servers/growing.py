"""A small MCP server over streamable HTTP for the tests (the SDK's MCPServer), on the port given
as its argument: `grow` adds a tool `extra` and tells the client its tool list changed."""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra`."""

    def extra() -> str:
        """The tool that grow added."""
        return "extra!"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[1])))
