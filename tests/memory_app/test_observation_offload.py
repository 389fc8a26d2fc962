"""The offload rule (seed 004), seen from the model: what the fake Messages API received."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.observations.models import Observation
from memory_app.observations.references import observation_parts
from sessions_app.models import ToolCall
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.observation_helpers import (
    NOTE,
    big_log,
    events,
    seed_summary,
    tool_result,
    tool_result_json,
    turn,
    use_fs_root,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_large_text_result_reaches_the_model_as_the_seeds_synthetic_observation(
    connect: Any, model_servers, settings: Any, tmp_path: Path
) -> None:
    fake_anthropic = model_servers().fake
    root = use_fs_root(settings, tmp_path)
    content = big_log()
    (root / "big_log.txt").write_text(content)
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "big_log.txt"}), text("done"))
    client = await connect()
    await client.create()
    await turn(client, "read the file big_log.txt and tell me the errors")
    block = tool_result(fake_anthropic.requests[1].body)
    observation_id = json.loads(block["content"])["scratchpad_id"]
    size = len(content.encode())
    assert re.fullmatch(r"[0-9a-f]{16}", observation_id)
    assert block["content"] == json.dumps(
        {
            "ok": True,
            "scratchpad_id": observation_id,
            "size_bytes": size,
            "kind": "text",
            "summary": seed_summary(content),
            "metadata": {"path": "big_log.txt", "bytes": size, "encoding": "utf-8"},
            "_note": NOTE,
        },
        ensure_ascii=False,
    )


async def test_tool_result_event_carries_the_observation_id(
    connect: Any, model_servers, settings: Any, tmp_path: Path
) -> None:
    fake_anthropic = model_servers().fake
    root = use_fs_root(settings, tmp_path)
    (root / "big_log.txt").write_text(big_log())
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "big_log.txt"}), text("done"))
    client = await connect()
    await client.create()
    frames = await turn(client)
    (event,) = events(frames, "tool.result")
    block = tool_result(fake_anthropic.requests[1].body)
    assert event["observation_id"] == json.loads(block["content"])["scratchpad_id"]
    assert event["content"] == block["content"]


async def test_small_result_goes_to_the_model_whole(
    connect: Any, model_servers, settings: Any, tmp_path: Path
) -> None:
    fake_anthropic = model_servers().fake
    root = use_fs_root(settings, tmp_path)
    (root / "small.txt").write_text("hello\n")
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "small.txt"}), text("done"))
    client = await connect()
    await client.create()
    frames = await turn(client)
    assert tool_result_json(fake_anthropic.requests[1].body) == {
        "path": "small.txt",
        "bytes": 6,
        "encoding": "utf-8",
        "content": "hello\n",
    }
    assert "observation_id" not in events(frames, "tool.result")[0]


def _file_whose_result_json_has(size: int) -> str:
    """Content such that fs_read's result for `f.txt` measures `size` bytes of JSON."""
    for length in range(size):
        result = {"path": "f.txt", "bytes": length, "encoding": "utf-8", "content": "x" * length}
        if len(json.dumps(result)) == size:
            return "x" * length
    raise AssertionError("no such length")


@pytest.mark.parametrize(("over", "offloaded"), [(0, False), (1, True)])
async def test_threshold_is_the_json_size_of_the_result(
    connect: Any,
    fake_anthropic: FakeAnthropicServer,
    settings: Any,
    tmp_path: Path,
    over: int,
    offloaded: bool,
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "f.txt").write_text(_file_whose_result_json_has(300 + over))
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "f.txt"}), text("done"))
    client = await connect()
    await client.create(settings={"offload": {"threshold_bytes": 300}})
    await turn(client)
    assert ("scratchpad_id" in tool_result_json(fake_anthropic.requests[1].body)) is offloaded


async def test_binary_result_summary_is_the_seeds_technical_note(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    root = use_fs_root(settings, tmp_path)
    data = bytes(range(256)) * 40
    (root / "archive.zip").write_bytes(data)
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "archive.zip", "encoding": "binary"}), text("done"))
    client = await connect()
    await client.create()
    await turn(client)
    block = tool_result(fake_anthropic.requests[1].body)
    observation_id = json.loads(block["content"])["scratchpad_id"]
    sha256 = hashlib.sha256(data).hexdigest()
    assert block["content"] == json.dumps(
        {
            "ok": True,
            "scratchpad_id": observation_id,
            "size_bytes": 10240,
            "kind": "binary",
            "summary": f"[BINARY: 10240 bytes, sha256={sha256}]",
            "metadata": {"path": "archive.zip", "bytes": 10240, "encoding": "binary"},
            "_note": NOTE,
        }
    )


CLIENT_TOOL = {"name": "web_fetch", "description": "Fetch a URL.", "input_schema": {"type": "object"}}


async def _client_answers(
    connect: Any, fake_anthropic: FakeAnthropicServer, content: Any, *, is_error: bool = False
) -> dict:
    """A client tool call answered with `content`; returns the tool_result the model got."""
    fake_anthropic.enqueue(tool_use("web_fetch", {"url": "https://httpbin.org/get"}), text("done"))
    client = await connect()
    await client.create(tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "fetch it"})
    call = (await client.until("tool.call"))[-1]
    await client.send(
        {"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": content, "is_error": is_error}
    )
    await client.until("turn.completed")
    return tool_result(fake_anthropic.requests[1].body)


async def test_client_tool_text_result_is_offloaded(connect: Any, model_servers) -> None:
    fake_anthropic = model_servers().fake
    content = "".join(f"line {i}\n" for i in range(2000))
    block = await _client_answers(connect, fake_anthropic, content)
    observation = json.loads(block["content"])
    assert observation == {
        "ok": True,
        "scratchpad_id": observation["scratchpad_id"],
        "size_bytes": len(content),
        "kind": "text",
        "summary": seed_summary(content),
        "metadata": {},
        "_note": NOTE,
    }


async def test_client_json_result_keeps_its_other_fields_as_metadata(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    body = "{" + ", ".join(f'"k{i}": {i}' for i in range(3000)) + "}"
    answer = json.dumps({"url": "https://httpbin.org/get", "status": 200, "content": body})
    observation = json.loads((await _client_answers(connect, fake_anthropic, answer))["content"])
    assert observation["metadata"] == {"url": "https://httpbin.org/get", "status": 200}
    assert observation["summary"] == seed_summary(body)


async def test_client_image_block_is_a_binary_observation(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    data = bytes(range(256)) * 20
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()},
    }
    observation = json.loads((await _client_answers(connect, fake_anthropic, [image]))["content"])
    assert (observation["kind"], observation["summary"], observation["metadata"]) == (
        "binary",
        f"[BINARY: 5120 bytes, sha256={hashlib.sha256(data).hexdigest()}]",
        {"type": "image", "media_type": "image/png"},
    )


async def test_large_error_result_is_offloaded_with_ok_false(connect: Any, model_servers) -> None:
    fake_anthropic = model_servers().fake
    trace = "".join(f'  File "app.py", line {i}, in handler\n' for i in range(500))
    block = await _client_answers(connect, fake_anthropic, trace, is_error=True)
    assert block["is_error"] is True
    assert json.loads(block["content"])["ok"] is False


async def test_an_offloaded_calls_stored_result_is_the_synthetic_observation(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    content = "".join(f"line {i}\n" for i in range(2000))
    block = await _client_answers(connect, fake_anthropic, content)
    row = await sync_to_async(ToolCall.objects.get)(name="web_fetch")
    assert row.result == json.loads(block["content"])


async def test_the_observation_holds_the_whole_result(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    content = "".join(f"line {i}\n" for i in range(2000))
    block = await _client_answers(connect, fake_anthropic, content)
    observation = await sync_to_async(Observation.objects.get)(
        pk=json.loads(block["content"])["scratchpad_id"]
    )
    assert await sync_to_async(lambda: observation_parts(observation=observation).text)() == content
    assert (observation.tool_name, observation.step, observation.line_count) == ("web_fetch", 1, 2000)
