"""Revoking a token stops its sessions' turns and their sub-sessions' before their next model
call, as a cancel does, whichever process runs them (issue 31, item 4): counted as the model
calls the fake Messages API receives after the revocation."""

from __future__ import annotations

import asyncio
import json
import time

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app import tokens
from sessions_app.engine import runner
from sessions_app.models import AgentSession, AgentToken, Turn
from tests.conftest import alist
from tests.fake_anthropic import FakeAnthropicServer, Reply, tool_use
from tests.memory_app.subsessions_support import MODEL, SETTINGS, Router, child_on, root
from tests.servers import Daphne, manage
from tests.sessions_app.test_e2e_daphne import open_ws

pytestmark = pytest.mark.django_db(transaction=True)
# Each model call takes this long in the fake: the revocation comes while the children's first
# calls are under way, and well before any of them could answer.
LATENCY_SECONDS = 2.0
TASKS = ("Task A.", "Task B.")
# A child that is never stopped loops on a server tool until its step budget is spent.
STEPS = 6


def _spawns(*tasks: str) -> Reply:
    return Reply(
        [
            {"type": "tool_use", "id": f"toolu_spawn{i}", "name": "spawn_session", "input": {"task": task}}
            for i, task in enumerate(tasks)
        ],
        stop_reason="tool_use",
    )


def _router() -> Router:
    router = Router()
    for task in TASKS:
        router.on(child_on(task), *[tool_use("count_words", {"text": "one two"}) for _ in range(STEPS)])
    router.on(root, _spawns(*TASKS))
    return router


async def _calls_reach(fake: FakeAnthropicServer, count: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while len(fake.requests) < count:
        assert time.monotonic() < deadline, f"{len(fake.requests)} model calls, waited for {count}"
        await asyncio.sleep(0.02)


async def _tree_running(connect, make_token, fake: FakeAnthropicServer, name: str):
    """A root whose first step spawned two children, each in its first (slow) model call."""
    fake.default_reply = _router()
    fake.latency_seconds = LATENCY_SECONDS
    client = await connect(await make_token(name))
    session = await client.create(model=MODEL, settings={**SETTINGS, "max_steps_per_turn": STEPS})
    await client.send({"type": "user.message", "content": "Do these in parallel."})
    await _calls_reach(fake, 1 + len(TASKS))  # the root's call and each child's first
    return client, session


async def test_revoking_a_token_cancels_its_turn_and_its_childrens_before_their_next_model_call(
    connect, make_token, fake_anthropic, settings
):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 60  # the socket's close is not what this is about
    _, session = await _tree_running(connect, make_token, fake_anthropic, "doomed")
    await sync_to_async(tokens.agent_tokens_revoke_named)(name="doomed")
    at_revocation = len(fake_anthropic.requests)
    await runner.turns_wait_idle(timeout=30)
    assert len(fake_anthropic.requests) - at_revocation == 0
    turns = await alist(Turn.objects.values_list("session_id", "stop_reason"))
    assert len(turns) == 1 + len(TASKS)
    assert {reason for _, reason in turns} == {"cancelled"}
    sessions = await alist(AgentSession.objects.values_list("status", "current_turn_id", "cancel_requested"))
    assert sessions == [("idle", None, False)] * (1 + len(TASKS))
    assert str(session["id"]) in {str(session_id) for session_id, _ in turns}


async def test_a_token_revoked_behind_the_services_back_is_stopped_at_the_lease_renewal(
    connect, make_token, fake_anthropic, settings
):
    """Belt and braces: a token whose row says revoked, however it came to (here an update of
    the row itself), has its turns asked to stop when their leases are renewed."""
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 60
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 0.6  # renewed every 0.2 s
    await _tree_running(connect, make_token, fake_anthropic, "sidestepped")
    await AgentToken.objects.filter(name="sidestepped").aupdate(revoked_at=timezone.now())
    at_revocation = len(fake_anthropic.requests)
    await runner.turns_wait_idle(timeout=30)
    assert len(fake_anthropic.requests) - at_revocation == 0
    assert set(await alist(Turn.objects.values_list("stop_reason", flat=True))) == {"cancelled"}


async def test_a_message_sent_before_the_socket_learns_of_the_revocation_starts_no_turn(
    connect, make_token, fake_anthropic, settings
):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 60  # the connection still counts its token good
    client = await connect(await make_token("late"))
    await client.create(model=MODEL)
    await sync_to_async(tokens.agent_tokens_revoke_named)(name="late")
    await client.send({"type": "user.message", "content": "hello"})
    assert await client.ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    assert await Turn.objects.acount() == 0
    assert fake_anthropic.requests == []


# -- two daphne processes on PostgreSQL + Redis, the command in a process of its own -----------
def _db_rows(env: dict[str, str], sql: str) -> list[tuple]:
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.services
async def test_revoking_from_the_command_cancels_a_tree_running_in_another_process(
    postgres_redis_env, tmp_path
):
    with FakeAnthropicServer(latency_seconds=LATENCY_SECONDS) as fake:
        fake.default_reply = _router()
        env = {
            **postgres_redis_env,
            "PALIMPSEST_PROVIDER": "anthropic",
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": fake.url,
            "PALIMPSEST_TOKEN_RECHECK_SECONDS": "60",
        }
        token = manage("create_agent_token", "doomed", env=env).strip().splitlines()[-1]
        with Daphne(env, tmp_path / "one.log") as one:
            ws = await open_ws(one, token)
            settings = {**SETTINGS, "max_steps_per_turn": STEPS}
            await ws.send(json.dumps({"type": "session.create", "model": MODEL, "settings": settings}))
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps({"type": "user.message", "content": "Do these in parallel."}))
            await _calls_reach(fake, 1 + len(TASKS), timeout=60)
            await asyncio.to_thread(manage, "revoke_agent_token", "doomed", env=env)
            at_revocation = len(fake.requests)
            deadline = time.monotonic() + 60
            while _db_rows(env, "SELECT id FROM sessions_app_turn WHERE ended_at IS NULL"):
                assert time.monotonic() < deadline, "the turns did not end"
                await asyncio.sleep(0.1)
            await asyncio.sleep(LATENCY_SECONDS)  # a call sent meanwhile would have arrived
            assert len(fake.requests) - at_revocation == 0
            reasons = _db_rows(env, "SELECT stop_reason FROM sessions_app_turn")
            assert sorted(r for (r,) in reasons) == ["cancelled"] * (1 + len(TASKS))
            await ws.close()
