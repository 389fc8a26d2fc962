"""Hostile clients cannot grow a real daphne process's memory (leak guards, not timings).

Each test measures the server's resident memory (`VmRSS`) after a warm-up frame of the same kind
(so the allocator's working set for one such frame is in the baseline), sends 25 hostile frames,
and requires the growth to stay under 20 MB, where the unbounded code grew by ~4 MB a frame.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.servers import Daphne, manage, server_env

HOSTILE_FRAMES = 25
MAX_GROWTH_BYTES = 20 * 1024 * 1024
MODEL_CHARS = 4 * 1024 * 1024
# A stored session whose replay is ~4 MB: each hostile attach asked for all of it again.
SEED_EVENTS = 8
SEED_EVENT_CHARS = 512 * 1024

SEED_SCRIPT = """
from sessions_app.models import AgentSession, SessionEvent
session = AgentSession.objects.get(pk={session_id!r})
start = session.last_seq
SessionEvent.objects.bulk_create(
    SessionEvent(session=session, seq=start + i + 1, type="assistant.delta", payload={{"text": "x" * {chars}}})
    for i in range({count})
)
AgentSession.objects.filter(pk=session.pk).update(last_seq=start + {count})
"""


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def settled_rss(pid: int) -> int:
    """The RSS once the server has finished what it was sent (two equal readings in a row)."""
    previous = -1
    for _ in range(50):
        current = rss_bytes(pid)
        if abs(current - previous) < 256 * 1024:
            return current
        previous = current
        time.sleep(0.2)
    return current


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    env = server_env(
        PALIMPSEST_SQLITE_PATH=str(tmp_path / "hostile.sqlite3"),
        # A client that reads nothing is given up on quickly in this test.
        PALIMPSEST_WS_DRAIN_SECONDS="2",
    )
    manage("migrate", "--noinput", env=env)
    return env


def token_for(env: dict[str, str]) -> str:
    return manage("create_agent_token", "hostile", env=env).strip().splitlines()[-1]


async def open_ws(server: Daphne, token: str, **kwargs: object) -> ClientConnection:
    return await connect(
        server.ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None, **kwargs
    )


async def test_huge_unique_model_names_do_not_grow_the_server(env, tmp_path):
    with Daphne(env, tmp_path / "daphne.log") as server:
        assert server.process is not None
        ws = await open_ws(server, token_for(env))

        async def hostile_create(n: int) -> dict:
            model = f"{n:08d}" + "m" * MODEL_CHARS
            await ws.send(json.dumps({"type": "session.create", "model": model}))
            return json.loads(await ws.recv())

        for n in range(2):
            await hostile_create(n)
        before = settled_rss(server.process.pid)
        replies = [await hostile_create(n) for n in range(2, 2 + HOSTILE_FRAMES)]
        after = settled_rss(server.process.pid)
        await ws.close()
    assert {(r["type"], r["code"]) for r in replies} == {("error", "invalid_value")}
    assert after - before < MAX_GROWTH_BYTES, f"grew by {(after - before) / 2**20:.1f} MB"
