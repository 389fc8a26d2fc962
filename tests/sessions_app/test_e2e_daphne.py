"""End to end: real daphne processes, a real websocket client library, real model paths."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.servers import Daphne, manage, server_env

CLIENT_TOOL = {"name": "client_lookup", "description": "Look up.", "input_schema": {"type": "object"}}


@pytest.fixture
def sqlite_env(tmp_path) -> dict[str, str]:
    env = server_env(PALIMPSEST_SQLITE_PATH=str(tmp_path / "e2e.sqlite3"))
    manage("migrate", "--noinput", env=env)
    return env


def token_for(env: dict[str, str]) -> str:
    return manage("create_agent_token", "e2e", env=env).strip().splitlines()[-1]


async def open_ws(server: Daphne, token: str) -> ClientConnection:
    return await connect(
        server.ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None
    )


async def recv_until(ws: ClientConnection, frame_type: str) -> list[dict]:
    frames = []
    while True:
        frame = json.loads(await ws.recv())
        frames.append(frame)
        if frame["type"] == frame_type:
            return frames


async def _chat_with_client_tool_and_reattach(server: Daphne, token: str) -> list[dict]:
    ws = await open_ws(server, token)
    await ws.send(json.dumps({"type": "session.create", "tools": [CLIENT_TOOL]}))
    session = json.loads(await ws.recv())["session"]
    await ws.send(json.dumps({"type": "user.message", "content": 'tool client_lookup {"q": "x"}'}))
    before = await recv_until(ws, "tool.call")
    await ws.close()  # gone mid-turn

    ws = await open_ws(server, token)
    seen = before[-1]["seq"]
    await ws.send(json.dumps({"type": "session.attach", "session_id": session["id"], "since_seq": seen}))
    replay = await recv_until(ws, "session.attached")
    await ws.send(
        json.dumps({"type": "tool.result", "tool_use_id": before[-1]["tool_use_id"], "content": "found"})
    )
    after = await recv_until(ws, "turn.completed")
    await ws.close()
    events = before + [f for f in replay + after if "seq" in f]
    assert [f["seq"] for f in events] == list(range(1, len(events) + 1))
    return events


async def test_scripted_chat_client_tool_disconnect_and_reattach(sqlite_env, tmp_path):
    with Daphne(sqlite_env, tmp_path / "daphne.log") as server:
        events = await _chat_with_client_tool_and_reattach(server, token_for(sqlite_env))
    final = [e for e in events if e["type"] == "assistant.message"][-1]
    assert final["content"] == [{"type": "text", "text": "client_lookup returned: found"}]
    assert events[-1]["stop_reason"] == "end_turn"


async def test_anthropic_provider_streams_through_daphne(tmp_path):
    with FakeAnthropicServer(chunk_delay_seconds=0.02) as fake:
        env = server_env(
            PALIMPSEST_SQLITE_PATH=str(tmp_path / "e2e.sqlite3"),
            PALIMPSEST_PROVIDER="anthropic",
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=fake.url,
        )
        manage("migrate", "--noinput", env=env)
        fake.enqueue(tool_use("client_lookup", {"q": "x"}), text("It was found, as you can see here."))
        with Daphne(env, tmp_path / "daphne.log") as server:
            events = await _chat_with_client_tool_and_reattach(server, token_for(env))
    deltas = [e["text"] for e in events if e["type"] == "assistant.delta"]
    assert len(deltas) >= 2
    assert "".join(deltas).endswith("It was found, as you can see here.")
    assert fake.requests[1].body["messages"][-1]["content"][0]["content"] == "found"


async def test_wrong_token_is_closed_with_4401(sqlite_env, tmp_path):
    with Daphne(sqlite_env, tmp_path / "daphne.log") as server:
        ws = await open_ws(server, "pal_wrong")
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_large_tool_result_passes_daphne_and_oversized_frame_is_refused(sqlite_env, tmp_path):
    env = {**sqlite_env, "PALIMPSEST_MAX_FRAME_BYTES": str(3 * 1024 * 1024)}
    with Daphne(env, tmp_path / "daphne.log") as server:
        ws = await open_ws(server, token_for(env))
        await ws.send(json.dumps({"type": "session.create", "tools": [CLIENT_TOOL]}))
        await ws.recv()
        await ws.send(json.dumps({"type": "session.create", "title": "x" * (4 * 1024 * 1024)}))
        refused = json.loads(await ws.recv())
        assert refused["code"] == "frame_too_large"
        await ws.send(json.dumps({"type": "user.message", "content": "tool client_lookup {}"}))
        call = (await recv_until(ws, "tool.call"))[-1]
        big = "y" * (2 * 1024 * 1024)  # above daphne's default 1 MiB limit
        await ws.send(json.dumps({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": big}))
        frames = await recv_until(ws, "turn.completed")
        await ws.close()
    result = next(f for f in frames if f["type"] == "tool.result")
    assert len(result["content"]) >= len(big) or "observation_id" in result
    assert frames[-1]["stop_reason"] == "end_turn"


# -- two processes sharing one session (PostgreSQL + Redis: conftest's postgres_redis_env) --
@pytest.mark.services
async def test_two_daphne_processes_share_one_session(postgres_redis_env, tmp_path):
    env = postgres_redis_env
    token = token_for(env)
    with Daphne(env, tmp_path / "one.log") as one, Daphne(env, tmp_path / "two.log") as two:
        a = await open_ws(one, token)
        await a.send(json.dumps({"type": "session.create", "tools": [CLIENT_TOOL]}))
        session = json.loads(await a.recv())["session"]
        b = await open_ws(two, token)
        await b.send(json.dumps({"type": "session.attach", "session_id": session["id"]}))
        await recv_until(b, "session.attached")
        # The turn runs in process one; process two carries the client's answer.
        await a.send(json.dumps({"type": "user.message", "content": "tool client_lookup {}"}))
        call = (await recv_until(b, "tool.call"))[-1]
        await b.send(
            json.dumps({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "via two"})
        )
        seen_b = await recv_until(b, "turn.completed")
        seen_a = await recv_until(a, "turn.completed")
        # A second turn started from process two while one is idle: the lease lives in the database.
        await b.send(json.dumps({"type": "user.message", "content": "echo from two"}))
        seen_b2 = await recv_until(b, "turn.completed")
        seen_a2 = await recv_until(a, "turn.completed")
        await a.close()
        await b.close()
    seqs_a = [f["seq"] for f in seen_a + seen_a2]
    assert seqs_a == list(range(1, len(seqs_a) + 1))
    assert [f["seq"] for f in seen_b2] == [f["seq"] for f in seen_a2]
    assert seen_b[-1]["stop_reason"] == "end_turn"
    final = [f for f in seen_a if f["type"] == "assistant.message"][-1]
    assert final["content"][0]["text"] == "client_lookup returned: via two"
    assert [f for f in seen_a2 if f["type"] == "assistant.message"][-1]["content"][0]["text"] == "from two"
