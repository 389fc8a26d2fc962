"""Client tools: declared to the server in `session.create` (`name`, `description`,
`input_schema`) and answered by this process when the model calls them.

A handler takes the call's input (a dict) and returns the result: a string, a list of content
blocks (`text`, `image`, ... as the Messages API takes them in a tool result), or anything else
JSON can encode (sent as its JSON text). It may be a coroutine function. Raising `ToolError`, or
any other exception, answers the call with `is_error: true` and the exception's message.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ToolHandler = Callable[[dict[str, Any]], Any | Awaitable[Any]]


class ToolError(Exception):
    """Raise in a handler to answer the call as an error (`is_error: true`) with this message."""


@dataclass(frozen=True)
class ClientTool:
    """A client tool: what the model is told about it, and the function that answers it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler | None = None

    def spec(self) -> dict[str, Any]:
        """The tool as `session.create` declares it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def tool(
    name: str, description: str, input_schema: dict[str, Any] | None = None
) -> Callable[[ToolHandler], ClientTool]:
    """Declare a client tool with its handler:

    @tool("lookup", "Look a word up.", {"type": "object", "properties": {"q": {"type": "string"}}})
    async def lookup(args: dict) -> str:
        return dictionary[args["q"]]

    session = await client.create_session(tools=[lookup])
    """

    def declare(handler: ToolHandler) -> ClientTool:
        return ClientTool(name, description, input_schema or {"type": "object"}, handler)

    return declare


def tools_split(
    tools: Iterable[ClientTool] | None, handlers: Mapping[str, ToolHandler] | None
) -> tuple[list[dict[str, Any]], dict[str, ToolHandler]]:
    """The specs to declare and the handlers by name, from `tools` and extra `handlers`."""
    specs: list[dict[str, Any]] = []
    by_name: dict[str, ToolHandler] = {}
    for item in tools or ():
        if not isinstance(item, ClientTool):
            raise TypeError(f"tools must be ClientTool objects (see palimpsest_client.tool), not {item!r}")
        if any(spec["name"] == item.name for spec in specs):
            raise ValueError(f"client tool {item.name!r} is declared twice")
        specs.append(item.spec())
        if item.handler is not None:
            by_name[item.name] = item.handler
    for name, handler in (handlers or {}).items():
        if not callable(handler):
            raise TypeError(f"the handler of {name!r} is not callable")
        by_name[name] = handler
    return specs, by_name


@dataclass(frozen=True)
class ToolAnswer:
    """What a `tool.result` frame carries for one call."""

    content: str | list[dict[str, Any]]
    is_error: bool = False


def _content_of(value: Any) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(b, dict) and "type" in b for b in value):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


async def tool_answer(handler: ToolHandler, tool_input: dict[str, Any]) -> ToolAnswer:
    """Run `handler` on a call's input and turn its outcome into a tool result."""
    try:
        result = handler(tool_input)
        if inspect.isawaitable(result):
            result = await result
    except ToolError as exc:
        return ToolAnswer(str(exc) or "the tool failed", is_error=True)
    except Exception as exc:
        return ToolAnswer(f"{type(exc).__name__}: {exc}", is_error=True)
    content = _content_of(result)
    # The server refuses an empty list of blocks, and any frame holding U+0000.
    if isinstance(content, str):
        content = content.replace("\x00", "")
    return ToolAnswer(content)
