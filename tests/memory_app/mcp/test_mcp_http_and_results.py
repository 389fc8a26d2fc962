"""A server over streamable HTTP (a small one the test starts with the SDK's MCPServer): its tools
are offered and run, and a tool list it changes reaches the session's next model call. Results:
an image as an image block, a large text through offload, a tool name past 64 characters."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from memory_app.mcp.manager import SERVICE_SCOPE, mcp_manager
from tests.memory_app.mcp.support import (
    call,
    create,
    http_server,
    result,
    script_config,
    text_of,
    turn,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_names(scope: str, name: str) -> list[str]:
    manager = mcp_manager(create=False)
    status = manager.status(scope, name) if manager is not None else None
    return [t.name for t in status.tools] if status is not None else []


async def test_a_streamable_http_server_is_used_and_its_new_tool_offered(connect: Any, settings: Any) -> None:
    with http_server() as url:
        settings.PALIMPSEST_MCP_SERVERS = {"growing": {"url": url}}
        client = await connect()
        session = await create(client)
        assert [n for n in session["server_tools"] if n.startswith("mcp__")] == [
            "mcp__growing__echo",
            "mcp__growing__grow",
        ]
        echoed = result(await turn(client, call("mcp__growing__echo", {"text": "over http"})))
        assert (echoed["is_error"], text_of(echoed)) == (False, "over http")
        assert text_of(result(await turn(client, call("mcp__growing__grow", {})))) == "grown"
        await asyncio.to_thread(wait_for, lambda: "extra" in tool_names(SERVICE_SCOPE, "growing"))
        extra = result(await turn(client, call("mcp__growing__extra", {})))
        assert (extra["is_error"], text_of(extra)) == (False, "extra!")


async def test_an_image_is_an_image_block(connect: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"flaky": script_config("flaky")}
    client = await connect()
    await create(client)
    found = result(await turn(client, call("mcp__flaky__picture", {})))
    image, caption = found["content"]
    assert image["type"] == "image" and image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png" and image["source"]["data"].startswith("iVBOR")
    assert caption == {"type": "text", "text": "a pixel"}


async def test_a_large_result_is_offloaded_like_any_other(connect: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"flaky": script_config("flaky")}
    client = await connect()
    await create(client)
    found = result(await turn(client, call("mcp__flaky__huge", {"size": 200_000})))
    synthetic = json.loads(text_of(found))
    assert synthetic["size_bytes"] >= 200_000 and synthetic["scratchpad_id"]
    assert found["observation_id"] == synthetic["scratchpad_id"]


async def test_a_name_past_64_characters_is_shortened_stably_and_callable(
    connect: Any, settings: Any
) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"flaky": script_config("flaky")}
    client = await connect()
    session = await create(client)
    long = [n for n in session["server_tools"] if n.startswith("mcp__flaky__a_tool_whose")]
    assert len(long) == 1 and len(long[0]) == 64 and NAME_RULE.match(long[0])
    assert (await create(client))["server_tools"] == session["server_tools"]
    found = result(await turn(client, call(long[0], {})))
    assert (found["is_error"], text_of(found)) == (False, "long")
