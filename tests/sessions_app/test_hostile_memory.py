"""Hostile clients cannot grow a real daphne process's memory (leak guards, not timings).

Each test measures the server's resident memory (`VmRSS`) after a warm-up frame of the same kind
(so the allocator's working set for one such frame is in the baseline), sends 25 hostile frames,
and requires the growth to stay under 20 MB, where the unbounded code grew by ~4 MB a frame.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

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
    SessionEvent(
        session=session, seq=start + i + 1, type="assistant.delta", payload={{"text": "x" * {chars}}}
    )
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


async def open_ws(server: Daphne, token: str, *, max_queue: int = 16) -> ClientConnection:
    return await connect(
        server.ws_url,
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=None,
        max_queue=max_queue,
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


async def test_repeated_attach_by_a_client_that_never_reads_does_not_grow_the_server(env, tmp_path):
    token = token_for(env)
    with Daphne(env, tmp_path / "daphne.log") as server:
        assert server.process is not None
        setup = await open_ws(server, token)
        await setup.send(json.dumps({"type": "session.create"}))
        session_id = json.loads(await setup.recv())["session"]["id"]
        await setup.close()
        manage(
            "shell",
            "-c",
            SEED_SCRIPT.format(session_id=session_id, chars=SEED_EVENT_CHARS, count=SEED_EVENTS),
            env=env,
        )
        attach = json.dumps({"type": "session.attach", "session_id": session_id})

        # Warm-up: one polite replay of the whole session.
        polite = await open_ws(server, token)
        await polite.send(attach)
        while json.loads(await polite.recv())["type"] != "session.attached":
            pass
        before = settled_rss(server.process.pid)

        # A client that stops reading (a small receive queue and no recv: its socket fills up).
        hostile = await open_ws(server, token, max_queue=1)
        for _ in range(HOSTILE_FRAMES):
            await hostile.send(attach)
        await asyncio.sleep(4)
        after = settled_rss(server.process.pid)
        # The server gave up on it (4408, then the connection is dropped: the close frame waits
        # behind what the client never read, so the client may see 1006).
        closed = False
        try:
            while True:
                await asyncio.wait_for(hostile.recv(), timeout=10)
        except ConnectionClosed:
            closed = True
        except TimeoutError:
            pass
        await hostile.close()

        # A polite client still gets the whole replay, in order.
        await polite.send(attach)
        frames = []
        while (frame := json.loads(await polite.recv()))["type"] != "session.attached":
            frames.append(frame)
        await polite.close()
    assert after - before < MAX_GROWTH_BYTES, f"grew by {(after - before) / 2**20:.1f} MB"
    assert closed
    assert "(code 4408)" in (tmp_path / "daphne.log").read_text()
    assert [f["seq"] for f in frames] == list(range(1, SEED_EVENTS + 1))


async def test_large_frames_from_a_client_that_does_not_read_are_not_piled_up(tmp_path):
    # The server waits for the client to read for longer than this test lasts.
    env = server_env(PALIMPSEST_SQLITE_PATH=str(tmp_path / "flood.sqlite3"), PALIMPSEST_WS_DRAIN_SECONDS="60")
    manage("migrate", "--noinput", env=env)
    token = token_for(env)
    big_get = json.dumps({"type": "session.get", "pad": "p" * MODEL_CHARS})
    with Daphne(env, tmp_path / "daphne.log") as server:
        assert server.process is not None
        polite = await open_ws(server, token)
        await polite.send(json.dumps({"type": "session.create", "system_prompt": "s" * 300_000}))
        session_id = json.loads(await polite.recv())["session"]["id"]
        attach = json.dumps({"type": "session.attach", "session_id": session_id})
        await polite.send(attach)
        while json.loads(await polite.recv())["type"] != "session.attached":
            pass
        for _ in range(2):  # warm-up: the working set of a few such frames
            await polite.send(big_get)
            await polite.recv()
        before = settled_rss(server.process.pid)

        hostile = await open_ws(server, token, max_queue=1)
        await hostile.send(attach)
        # 300 KB answers it never reads, until the server's sends wait for it...
        for _ in range(40):
            await hostile.send(json.dumps({"type": "session.get"}))
        # ...then 4 MB frames, which the server no longer reads: the client's socket fills up.
        sent = 0
        for _ in range(HOSTILE_FRAMES):
            try:
                await asyncio.wait_for(hostile.send(big_get), timeout=2)
            except TimeoutError:
                break
            sent += 1
        await asyncio.sleep(1)
        after = settled_rss(server.process.pid)
        hostile.transport.abort()
        await polite.close()
    assert after - before < MAX_GROWTH_BYTES, f"grew by {(after - before) / 2**20:.1f} MB"
    assert sent < HOSTILE_FRAMES  # the server stopped reading
