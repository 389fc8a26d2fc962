"""Done when (issue 36, item 5): "an `always_ask` tool survives a kill -9 while waiting and runs
after the approval". A real daphne starts a turn whose server call waits for an approval and is
killed with SIGKILL; the approval, given to another live process (the HTTP API, or the websocket
frame), makes that process take the turn over and run the call with its stored input."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from tests.servers import Daphne, manage
from tests.sessions_app.test_e2e_daphne import open_ws, token_for
from tests.sessions_app.test_turn_repair_daphne import (
    BESIDE_A_LIVE_PROCESS,
    RECV_LIMIT_SECONDS,
    _lease_expiry_sqlite,
    _sqlite_env,
    recv_until,
)

ASK = {"approvals": {"count_words": "always_ask"}}
CALL = 'tool count_words {"text": "one two three"}'


async def _start_asked_call(server: Daphne, token: str):
    ws = await open_ws(server, token)
    await ws.send(json.dumps({"type": "session.create", "settings": ASK}))
    session = json.loads(await asyncio.wait_for(ws.recv(), RECV_LIMIT_SECONDS))["session"]
    await ws.send(json.dumps({"type": "user.message", "content": CALL}))
    asked = (await recv_until(ws, "tool.approval_requested"))[-1]
    assert asked["input"] == {"text": "one two three"}
    return ws, session, asked


def _post(url: str, body: dict, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=RECV_LIMIT_SECONDS) as response:
        return response.status, json.loads(response.read())


def _assert_ran(after: list[dict], asked: dict) -> None:
    assert [f for f in after if f["type"] == "error"] == []
    assert after[-1]["stop_reason"] == "end_turn"
    results = [f for f in after if f["type"] == "tool.result"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [(asked["tool_use_id"], False)]
    assert "3" in json.dumps(results[0]["content"])  # three words: the stored input ran
    answered = [f for f in after if f["type"] == "tool.approval_answered"]
    assert [a["approved"] for a in answered] == [True]


async def test_sqlite_killed_while_waiting_the_api_approval_resumes_it_in_the_next_process(
    sqlite_path, tmp_path
):
    # The lease as deployed and no sweep: the API's answer takes the dead turn over (its holder's
    # pid is gone) and the new process runs the call.
    env = _sqlite_env(sqlite_path, PALIMPSEST_TURN_LEASE_SECONDS="60", PALIMPSEST_TURN_SWEEP_SECONDS="3600")
    manage("migrate", "--noinput", env=env)
    token = token_for(env)
    one = Daphne(env, tmp_path / "one.log").start()
    try:
        ws, session, asked = await _start_asked_call(one, token)
    finally:
        one.kill()
    await ws.close()
    assert _lease_expiry_sqlite(sqlite_path, session["id"]) is not None  # the dead turn holds it
    with Daphne(env, tmp_path / "two.log") as two:
        ws = await open_ws(two, token)
        await ws.send(
            json.dumps({"type": "session.attach", "session_id": session["id"], "since_seq": asked["seq"]})
        )
        await recv_until(ws, "session.attached")
        status, answered = await asyncio.to_thread(
            _post,
            f"http://127.0.0.1:{two.port}/api/v1/sessions/{session['id']}/tool_calls/"
            f"{asked['tool_use_id']}/approve",
            {"input_sha256": asked["input_sha256"]},
            token,
        )
        assert (status, answered["approval"]) == (200, "approved"), answered
        after = await recv_until(ws, "turn.completed")
        await ws.close()
    _assert_ran(after, asked)


@pytest.mark.services
async def test_two_processes_one_killed_while_waiting_the_other_runs_the_call_after_the_frame(
    postgres_redis_env, tmp_path
):
    env = {**postgres_redis_env, **BESIDE_A_LIVE_PROCESS}
    token = token_for(env)
    one = Daphne(env, tmp_path / "one.log").start()
    with Daphne(env, tmp_path / "two.log") as two:
        try:
            a, session, asked = await _start_asked_call(one, token)
            b = await open_ws(two, token)
            await b.send(json.dumps({"type": "session.attach", "session_id": session["id"]}))
            await recv_until(b, "session.attached")
        finally:
            one.kill()
        # Answered at once, before the dead process's lease runs out: kept, and used by the
        # process that takes the turn over (here, when the lease has run out: its sweep).
        await b.send(json.dumps({"type": "tool.approve", "tool_use_id": asked["tool_use_id"]}))
        after = await recv_until(b, "turn.completed")
        await b.close()
    _assert_ran(after, asked)


@pytest.fixture
def sqlite_path(tmp_path):
    return tmp_path / "approvals.sqlite3"
