"""`{{stepN.field}}` references (seed 004): resolved against the full stored result, before the
tool runs and before `tool.call`, so a client tool receives the full content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import Message, ToolCall
from tests.fake_anthropic import FakeAnthropicServer, Reply, text, tool_use
from tests.memory_app.observation_helpers import big_log, events, tool_result, tool_results, use_fs_root

pytestmark = pytest.mark.django_db(transaction=True)

LOG = big_log()
FS_WRITE = {
    "name": "fs_write",
    "description": "Write a file on the client.",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    },
}


async def _client_call(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path, *replies: Any
) -> tuple[Any, list[dict]]:
    """fs_read offloads LOG (from log.txt) then the model's `replies`; the client answers each
    client tool call with "written". Returns the client and every frame of the turn."""
    root = use_fs_root(settings, tmp_path)
    (root / "log.txt").write_text(LOG)
    (root / "small.txt").write_text("tiny\n")
    fake_anthropic.enqueue(*replies, text("done"))
    client = await connect()
    await client.create(tools=[FS_WRITE])
    await client.send({"type": "user.message", "content": "download and save"})
    frames: list[dict] = []
    while True:
        frame = await client.recv(timeout=20)
        frames.append(frame)
        if frame["type"] == "tool.call" and frame["executor"] == "client":
            await client.send(
                {"type": "tool.result", "tool_use_id": frame["tool_use_id"], "content": "written"}
            )
        if frame["type"] == "turn.completed":
            return client, frames


async def test_reference_passes_the_full_content_to_a_client_tool(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    _, frames = await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "log.txt"}),
        tool_use("fs_write", {"path": "/tmp/out.txt", "content": "{{step1.content}}"}),
    )
    call = events(frames, "tool.call")[1]
    assert call["executor"] == "client"
    assert call["input"] == {"path": "/tmp/out.txt", "content": LOG}


async def test_the_stored_assistant_message_keeps_the_models_reference(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "log.txt"}),
        tool_use("fs_write", {"path": "/tmp/out.txt", "content": "{{step1.content}}"}),
    )
    sent = fake_anthropic.requests[2].body["messages"][-2]
    (block,) = [b for b in sent["content"] if b["type"] == "tool_use"]
    assert block["input"] == {"path": "/tmp/out.txt", "content": "{{step1.content}}"}
    stored = await sync_to_async(
        lambda: Message.objects.filter(role="assistant").order_by("position")[1].content
    )()
    assert stored is not None
    assert stored[-1]["input"]["content"] == "{{step1.content}}"


async def test_the_tool_call_row_holds_the_resolved_input(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "log.txt"}),
        tool_use("fs_write", {"path": "/tmp/out.txt", "content": "{{step1.content}}"}),
    )
    row = await sync_to_async(ToolCall.objects.get)(name="fs_write")
    assert row.input["content"] == LOG


async def test_reference_inside_a_longer_string_inserts_a_metadata_field(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    _, frames = await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "log.txt"}),
        tool_use("fs_write", {"path": "copy-of-{{step1.path}}", "content": "{{ step1.bytes }}"}),
    )
    assert events(frames, "tool.call")[1]["input"] == {"path": "copy-of-log.txt", "content": len(LOG)}


async def test_reference_to_a_small_result_uses_the_stored_result(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    _, frames = await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "small.txt"}),
        tool_use("fs_write", {"path": "out", "content": "{{step1.content}}"}),
    )
    assert events(frames, "tool.call")[1]["input"]["content"] == "tiny\n"


def _two_calls(first: dict, second: dict) -> Reply:
    return Reply(
        [
            {"type": "tool_use", "id": "toolu_first", "name": "fs_read", "input": first},
            {"type": "tool_use", "id": "toolu_second", "name": "fs_read", "input": second},
        ],
        stop_reason="tool_use",
    )


async def test_steps_number_the_turns_tool_calls_in_the_models_order(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    _, frames = await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "small.txt"}),  # step 1
        _two_calls({"path": "small.txt"}, {"path": "log.txt"}),  # steps 2 and 3
        tool_use("fs_write", {"path": "{{step2.path}}", "content": "{{step3.content}}"}),  # step 4
    )
    assert events(frames, "tool.call")[3]["input"] == {"path": "small.txt", "content": LOG}


async def test_reference_resolves_into_a_server_tools_input(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "small.txt"}),
        tool_use("fs_read", {"path": "{{step1.path}}"}),
    )
    assert json.loads(tool_result(fake_anthropic.requests[2].body)["content"])["path"] == "small.txt"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("{{step2.content}}", "there is no step 2 with a result in this turn"),
        ("{{step0.content}}", "there is no step 0 with a result in this turn"),
        (
            "{{step1.nonsense}}",
            "step 1's result has no field 'nonsense'; its fields: content, path, bytes, encoding.",
        ),
    ],
)
async def test_unresolvable_reference_is_a_tool_error_and_the_client_is_not_asked(
    connect: Any,
    fake_anthropic: FakeAnthropicServer,
    settings: Any,
    tmp_path: Path,
    reference: str,
    message: str,
) -> None:
    _, frames = await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "log.txt"}),
        tool_use("fs_write", {"path": "out", "content": reference}),
    )
    block = tool_result(fake_anthropic.requests[2].body)
    assert block["is_error"] is True
    assert message in block["content"]
    assert events(frames, "tool.call")[1]["executor"] == "server"


async def test_reference_to_a_failed_step_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("fs_read", {"path": "missing.txt"}),
        tool_use("fs_write", {"path": "out", "content": "{{step1.content}}"}),
    )
    block = tool_result(fake_anthropic.requests[2].body)
    assert block["is_error"] is True
    assert "Step 1 (fs_read) failed" in block["content"]


async def test_reference_to_a_sibling_call_of_the_same_step_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _client_call(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        _two_calls({"path": "log.txt"}, {"path": "{{step1.path}}"}),
    )
    first, second = tool_results(fake_anthropic.requests[1].body)
    assert "is_error" not in first
    assert second["is_error"] is True
    assert "there is no step 1 with a result in this turn" in second["content"]
