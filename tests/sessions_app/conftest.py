from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessions_app.engine.tools import ToolError, ToolSpec, registry


@pytest.fixture
def echo_tool() -> Iterator[ToolSpec]:
    """A server tool for exercising the registry path: echoes `text`, fails on `fail`."""

    async def handler(ctx, tool_input):
        if tool_input.get("fail"):
            raise ToolError("test_echo cannot do that: fail was set")
        if tool_input.get("crash"):
            raise RuntimeError("boom")
        return {"echo": tool_input.get("text"), "step": ctx.step}

    spec = ToolSpec(
        name="test_echo",
        description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        handler=handler,
    )
    registry.register(spec)
    yield spec
    registry.unregister(spec.name)


CLIENT_TOOL = {
    "name": "client_lookup",
    "description": "Look something up on the client.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


# Settings for tests that assert exact requests of the bare engine: no memory features.
NO_MEMORY = {"notepad": {"enabled": False}, "scratchpad": {"enabled": False}}
