"""A turn whose daphne process is killed with SIGKILL is finished by another process: taken over
while a client tool call is pending (the client's result is used, the model answers), or ended
with `server_stopped` and `turn.completed` (`stop_reason: "error"`) when it died mid model call.
On SQLite (one process after another on the same file) and on PostgreSQL + Redis (two processes
running side by side: `services`)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fake_anthropic import FakeAnthropicServer, stalled, text
from tests.fake_openai import FakeOpenAIServer
from tests.servers import Daphne, manage, server_env
from tests.sessions_app.test_e2e_daphne import CLIENT_TOOL, open_ws, token_for

# Short leases, so that a killed process's turn is repaired soon. One process at a time (SQLite)
# may use a very short one; beside a live process the lease must outlast the live process's
# own stalls (its first model call imports the SDK), or its live turn would be repaired too.
FAST = {"PALIMPSEST_TURN_LEASE_SECONDS": "2", "PALIMPSEST_TURN_SWEEP_SECONDS": "0.3"}
NO_SWEEP = {"PALIMPSEST_TURN_LEASE_SECONDS": "2", "PALIMPSEST_TURN_SWEEP_SECONDS": "3600"}
BESIDE_A_LIVE_PROCESS = {"PALIMPSEST_TURN_LEASE_SECONDS": "8", "PALIMPSEST_TURN_SWEEP_SECONDS": "0.3"}
# No frame awaited here takes this long unless something is wrong: fail instead of hanging.
RECV_LIMIT_SECONDS = 60


@pytest.fixture
def sqlite_path(tmp_path) -> Path:
    return tmp_path / "repair.sqlite3"


def _sqlite_env(path: Path, **extra: str) -> dict[str, str]:
    return server_env(PALIMPSEST_SQLITE_PATH=str(path), **extra)


def _lease_expiry_sqlite(path: Path, session_id: str) -> datetime | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT lease_expires_at FROM sessions_app_agentsession WHERE id = ?",
            (session_id.replace("-", ""),),
        ).fetchone()
    return datetime.fromisoformat(row[0]).replace(tzinfo=UTC) if row and row[0] else None


async def _wait_past(expiry: datetime | None) -> None:
    """Until the dead process's lease (nobody renews it any more) has run out."""
    if expiry is not None:
        await asyncio.sleep(max(0.0, (expiry - datetime.now(UTC)).total_seconds()) + 0.2)


async def _until_all(ws, *types: str) -> list[dict]:
    """Frames until each of `types` was seen (in whatever order they come)."""
    frames: list[dict] = []
    wanted = set(types)
    while wanted:
        frame = json.loads(await asyncio.wait_for(ws.recv(), RECV_LIMIT_SECONDS))
        frames.append(frame)
        wanted.discard(frame["type"])
    return frames


async def recv_until(ws, frame_type: str) -> list[dict]:
    """Frames up to and including the first of `frame_type`."""
    return await _until_all(ws, frame_type)


async def _start_client_call(server: Daphne, token: str):
    ws = await open_ws(server, token)
    await ws.send(json.dumps({"type": "session.create", "tools": [CLIENT_TOOL]}))
    session = json.loads(await ws.recv())["session"]
    await ws.send(json.dumps({"type": "user.message", "content": 'tool client_lookup {"q": "x"}'}))
    call = (await recv_until(ws, "tool.call"))[-1]
    return ws, session, call


async def _start_stalled_model_call(server: Daphne, token: str):
    ws = await open_ws(server, token)
    await ws.send(json.dumps({"type": "session.create"}))
    session = json.loads(await ws.recv())["session"]
    await ws.send(json.dumps({"type": "user.message", "content": "hello"}))
    # The model has begun to answer (a delta went out) and then goes silent.
    before = await recv_until(ws, "assistant.delta")
    return ws, session, before


def _assert_ended_by_repair(frames: list[dict], turn_id: str) -> None:
    errors = [f for f in frames if f["type"] == "error" and "seq" in f]
    completed = [f for f in frames if f["type"] == "turn.completed"]
    assert [e["code"] for e in errors] == ["server_stopped"]
    assert [(c["turn_id"], c["stop_reason"]) for c in completed] == [(turn_id, "error")]


async def _assert_idle_and_usable(ws) -> None:
    await ws.send(json.dumps({"type": "session.get"}))
    state = json.loads(await asyncio.wait_for(ws.recv(), RECV_LIMIT_SECONDS))
    assert (state["session"]["status"], state["session"]["turn_id"]) == ("idle", None)
    await ws.send(json.dumps({"type": "turn.cancel"}))
    assert json.loads(await asyncio.wait_for(ws.recv(), RECV_LIMIT_SECONDS))["code"] == "no_turn_in_progress"
    await ws.send(json.dumps({"type": "user.message", "content": "and now?"}))
    frames = await recv_until(ws, "turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert [f for f in frames if f["type"] == "assistant.message"][-1]["content"] == [
        {"type": "text", "text": "Back again."}
    ]


# -- SQLite: the process dies, another starts on the same file --------------------------------
async def test_sqlite_killed_while_a_client_call_waits_the_attach_takes_over(sqlite_path, tmp_path):
    env = _sqlite_env(sqlite_path, **NO_SWEEP)
    manage("migrate", "--noinput", env=env)
    token = token_for(env)
    one = Daphne(env, tmp_path / "one.log").start()
    try:
        ws, session, call = await _start_client_call(one, token)
    finally:
        one.kill()
    await ws.close()
    await _wait_past(_lease_expiry_sqlite(sqlite_path, session["id"]))
    with Daphne(env, tmp_path / "two.log") as two:
        ws = await open_ws(two, token)
        await ws.send(
            json.dumps({"type": "session.attach", "session_id": session["id"], "since_seq": call["seq"]})
        )
        replay = await recv_until(ws, "session.attached")
        assert [f["type"] for f in replay] == ["session.attached"]  # taken over: nothing ended
        await ws.send(
            json.dumps({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "found"})
        )
        after = await recv_until(ws, "turn.completed")
        await ws.close()
    assert [f["type"] for f in after if f["type"] == "error"] == []
    assert after[-1]["stop_reason"] == "end_turn"
    final = [f for f in after if f["type"] == "assistant.message"][-1]
    assert final["content"] == [{"type": "text", "text": "client_lookup returned: found"}]
    seqs = [f["seq"] for f in after if "seq" in f]
    assert seqs == list(range(call["seq"] + 1, call["seq"] + 1 + len(seqs)))


async def test_sqlite_killed_while_a_client_call_waits_the_next_process_resumes_it_at_once(
    sqlite_path, tmp_path
):
    # The lease as deployed (60 s) and no sweep: only the dead holder's pid tells the process
    # that starts next to take the turn over, at the client's attach.
    env = _sqlite_env(sqlite_path, PALIMPSEST_TURN_LEASE_SECONDS="60", PALIMPSEST_TURN_SWEEP_SECONDS="3600")
    manage("migrate", "--noinput", env=env)
    token = token_for(env)
    one = Daphne(env, tmp_path / "one.log").start()
    try:
        ws, session, call = await _start_client_call(one, token)
    finally:
        one.kill()  # and reaped: its pid is gone
    await ws.close()
    expiry = _lease_expiry_sqlite(sqlite_path, session["id"])
    assert expiry is not None and (expiry - datetime.now(UTC)).total_seconds() > 30
    with Daphne(env, tmp_path / "two.log") as two:
        ws = await open_ws(two, token)
        started = time.monotonic()
        await ws.send(
            json.dumps({"type": "session.attach", "session_id": session["id"], "since_seq": call["seq"]})
        )
        attached = (await recv_until(ws, "session.attached"))[-1]
        assert attached["pending_tool_calls"] == [
            {"tool_use_id": call["tool_use_id"], "name": "client_lookup", "input": {"q": "x"}}
        ]
        assert datetime.fromisoformat(attached["resumes_at"]) < expiry
        await ws.send(
            json.dumps({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "at once"})
        )
        after = await recv_until(ws, "turn.completed")
        elapsed = time.monotonic() - started
        await ws.close()
    assert elapsed < 3, f"the turn took {elapsed:.1f} s to resume and complete"
    assert [f for f in after if f["type"] == "error"] == []
    assert after[-1]["stop_reason"] == "end_turn"
    final = [f for f in after if f["type"] == "assistant.message"][-1]
    assert final["content"] == [{"type": "text", "text": "client_lookup returned: at once"}]


def _model_server(provider: str) -> tuple[FakeAnthropicServer, dict[str, str]]:
    """A fake of `provider`'s API (not started) and the environment that points a server at it."""
    fake = FakeOpenAIServer() if provider == "openai" else FakeAnthropicServer()
    prefix = provider.upper()
    return fake, {
        "PALIMPSEST_PROVIDER": provider,
        f"{prefix}_API_KEY": "test-key",
        f"{prefix}_BASE_URL": "",  # filled in once the fake has its URL
    }


def _pointed(fake: FakeAnthropicServer, env: dict[str, str]) -> dict[str, str]:
    return {k: (fake.url if k.endswith("_BASE_URL") else v) for k, v in env.items()}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_sqlite_killed_mid_model_call_the_turn_is_ended_with_an_error(sqlite_path, tmp_path, provider):
    fake, model_env = _model_server(provider)
    with fake:
        env = _sqlite_env(sqlite_path, **_pointed(fake, model_env), **FAST)
        manage("migrate", "--noinput", env=env)
        token = token_for(env)
        fake.enqueue(stalled(text("Hello there, I was about to say more."), after_events=4, seconds=60))
        one = Daphne(env, tmp_path / "one.log").start()
        try:
            ws, session, before = await _start_stalled_model_call(one, token)
        finally:
            one.kill()
        await ws.close()
        turn_id = next(f["turn_id"] for f in before if f["type"] == "turn.started")
        fake.enqueue(text("Back again."))
        with Daphne(env, tmp_path / "two.log") as two:
            ws = await open_ws(two, token)
            await ws.send(json.dumps({"type": "session.attach", "session_id": session["id"]}))
            frames = await _until_all(ws, "session.attached", "turn.completed")
            _assert_ended_by_repair(frames, turn_id)
            await _assert_idle_and_usable(ws)
            await ws.close()
    # The next request holds both of the user's messages and nothing of the lost answer.
    sent = json.dumps(fake.requests[-1].body["messages"])
    assert '"hello"' in sent and '"and now?"' in sent and "about to say" not in sent


# -- PostgreSQL + Redis: two processes side by side, one is killed ----------------------------
@pytest.mark.services
async def test_two_processes_one_killed_while_a_client_call_waits_the_other_finishes_it(
    postgres_redis_env, tmp_path
):
    env = {**postgres_redis_env, **BESIDE_A_LIVE_PROCESS}
    token = token_for(env)
    one = Daphne(env, tmp_path / "one.log").start()
    with Daphne(env, tmp_path / "two.log") as two:
        try:
            a, session, call = await _start_client_call(one, token)
            b = await open_ws(two, token)
            await b.send(json.dumps({"type": "session.attach", "session_id": session["id"]}))
            await recv_until(b, "session.attached")
        finally:
            one.kill()
        # Sent at once, before the dead process's lease runs out: kept, and used by the process
        # that takes the turn over.
        await b.send(
            json.dumps({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "via two"})
        )
        after = await recv_until(b, "turn.completed")
        await b.close()
    assert [f for f in after if f["type"] == "error"] == []
    assert after[-1]["stop_reason"] == "end_turn"
    final = [f for f in after if f["type"] == "assistant.message"][-1]
    assert final["content"] == [{"type": "text", "text": "client_lookup returned: via two"}]


@pytest.mark.services
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_two_processes_one_killed_mid_model_call_the_other_ends_the_turn(
    postgres_redis_env, tmp_path, provider
):
    fake, model_env = _model_server(provider)
    with fake:
        env = {**postgres_redis_env, **BESIDE_A_LIVE_PROCESS, **_pointed(fake, model_env)}
        token = token_for(env)
        fake.enqueue(stalled(text("Hello there, I was about to say more."), after_events=4, seconds=60))
        one = Daphne(env, tmp_path / "one.log").start()
        with Daphne(env, tmp_path / "two.log") as two:
            b = await open_ws(two, token)
            try:
                a, session, before = await _start_stalled_model_call(one, token)
                await b.send(json.dumps({"type": "session.attach", "session_id": session["id"]}))
                await recv_until(b, "session.attached")
            finally:
                one.kill()
            turn_id = next(f["turn_id"] for f in before if f["type"] == "turn.started")
            # The sweep of process two finds the dead lease; its client is told through Redis.
            frames = await _until_all(b, "turn.completed")
            _assert_ended_by_repair(frames, turn_id)
            fake.enqueue(text("Back again."))
            await _assert_idle_and_usable(b)
            await b.close()
