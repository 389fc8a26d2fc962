"""A small MCP server over stdio for the tests (written with the SDK's MCPServer): tools that
answer, crash the process, hang, return a huge text, an image or an error, tell a variable of
their environment, and one with a very long name."""

from __future__ import annotations

import os
import time

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("flaky")
# A 1x1 PNG.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def crash() -> str:
    """End the server's process at once."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    while True:
        time.sleep(60)


@server.tool()
def huge(size: int) -> str:
    """A text of `size` characters."""
    return "x" * size


@server.tool()
def picture() -> list:
    """An image and a caption."""
    return [types.ImageContent(data=PIXEL, mime_type="image/png"), types.TextContent(text="a pixel")]


@server.tool()
def fail(message: str) -> str:
    """Report an error."""
    raise ToolError(message)


@server.tool()
def getenv(name: str) -> str:
    """A variable of the server's environment ("" when unset)."""
    return os.environ.get(name, "")


@server.tool()
def leak_in_error(name: str) -> str:
    """Report an error that holds a variable of the server's environment."""
    raise ToolError(f"the value is {os.environ.get(name, '')}")


@server.tool(name="a_tool_whose_name_is_much_longer_than_anything_a_model_provider_accepts")
def long_named() -> str:
    """A tool with a long name."""
    return "long"


if __name__ == "__main__":
    server.run()
