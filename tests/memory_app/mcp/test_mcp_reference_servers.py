"""The reference MCP servers from PyPI, started by the service over stdio and used by a session
through the engine with the scripted model: `mcp-server-time` (the service's) and
`mcp-server-git` on a repository the test makes (an agent's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.models import Agent
from tests.memory_app.mcp.support import (
    TURN_GUARD_SECONDS,
    call,
    create,
    git_config,
    git_repo,
    result,
    text_of,
    time_config,
    turn,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_service_time_server_is_offered_and_answers(connect: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"time": time_config()}
    client = await connect()
    session = await create(client)
    assert "mcp__time__get_current_time" in session["server_tools"]
    assert session["server_tools"][-2:] == ["mcp__time__convert_time", "mcp__time__get_current_time"] or (
        "mcp__time__convert_time" in session["server_tools"]
    )
    frames = await turn(client, call("mcp__time__get_current_time", {"timezone": "Europe/Paris"}))
    found = result(frames)
    assert found["is_error"] is False
    assert json.loads(text_of(found))["timezone"] == "Europe/Paris"


async def test_an_mcp_tool_asks_by_default_and_a_setting_allows_it(connect: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"time": time_config()}
    client = await connect()
    await create(client)
    await client.send(
        {"type": "user.message", "content": call("mcp__time__get_current_time", {"timezone": "UTC"})}
    )
    asked = (await client.until("tool.approval_requested", timeout=TURN_GUARD_SECONDS))[-1]
    assert (asked["name"], asked["input"]) == ("mcp__time__get_current_time", {"timezone": "UTC"})
    assert await client.nothing_more()  # the call waits: nothing ran
    await client.send({"type": "tool.deny", "tool_use_id": asked["tool_use_id"], "reason": "not now"})
    frames = await client.until("turn.completed", timeout=TURN_GUARD_SECONDS)
    denied = result(frames)
    assert denied["is_error"] is True and "not now" in text_of(denied)
    # The session's setting (or the service's default) lets the server's tools run unasked.
    allowed = await create(client, settings={"approvals": {"mcp__time__*": "always_allow"}})
    assert allowed["settings"]["approvals"] == {"mcp__time__*": "always_allow"}
    frames = await turn(client, call("mcp__time__get_current_time", {"timezone": "UTC"}))
    assert not [f for f in frames if f["type"] == "tool.approval_requested"]
    assert result(frames)["is_error"] is False


async def test_an_agents_git_server_reads_the_repository(connect: Any, tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    client = await connect()
    await client.send({"type": "agent.create", "name": "coder"})
    assert (await client.recv())["type"] == "agent.created"
    agent = await sync_to_async(Agent.objects.get)(name="coder")
    await sync_to_async(services.agent_mcp_server_set)(
        agent_id=agent.pk, name="git", config=git_config(repo), author="operator:test"
    )
    session = await create(client, agent="coder")
    assert "mcp__git__git_status" in session["server_tools"]
    status = result(await turn(client, call("mcp__git__git_status", {"repo_path": str(repo)})))
    assert status["is_error"] is False and "untracked.txt" in text_of(status)
    log = result(await turn(client, call("mcp__git__git_log", {"repo_path": str(repo), "max_count": 5})))
    assert "second commit" in text_of(log) and "first commit" in text_of(log)
    other = await create(await connect())
    assert not [name for name in other["server_tools"] if name.startswith("mcp__")]
