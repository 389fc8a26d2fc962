"""What a one-step turn cannot do without, each part measured alone: issue 12's floor.

    .venv/bin/python bench/bench_floor.py     # 1,000 of each (100 at 10,000 messages), then 200 turns

A one-step turn must at least: take one frame in through daphne and send frames out, make one
streamed Messages API call through the `anthropic` SDK (the project's rule: the real SDK), and
commit two write transactions (the user's message; the answer). Each is timed here with nothing
of Palimpsest around it, as CPU time of the process that does it (all its threads):

- `SDK call`: one streamed call ("ok, done.", 100 or 10,000 messages of history shaped as the
  step benchmark's, 30 KB or 3 MB) against the fake Messages API in a process of its own, read
  as the SDK's raw events (`client.post(..., stream=True)`, the least the SDK does per call), in
  this process;
- `provider call`: the same through `AnthropicProvider.complete` (what the engine calls: the SDK
  call plus putting the answer together);
- `transaction`: `BEGIN IMMEDIATE`, an insert of a message-sized row, an update of one row,
  `COMMIT`, through Django's cursor on SQLite (WAL, as the server runs);
- `frame round trip`: a real daphne (the server, `DEBUG=0`) taking one websocket frame in and
  sending one frame out (`{"type": "nope"}`, answered by an error frame): daphne's CPU per frame;
- `the least turn on the stack`: a one-step turn as little as daphne, Channels, Django's
  database layer and the SDK allow (`_stack_floor.py`: one consumer, two raw write transactions
  on the database threads, one group send per write, five frames, the history's bytes in
  memory), driven by the same client as the server: daphne's CPU per turn and server work;
- `one-step turn`: the server's whole turn (`bench_server.py step`), daphne's CPU per turn, for
  comparison.

The floor of a turn is at least one SDK call, two transactions and one frame round trip (a turn
sends five frames out, not one: the floor is below what any server could reach). The least turn
on the stack is what any server built on this stack pays: the parts together, with the hops
between them (threads, the event loop, the channel layer) that no part measured alone pays.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _setup import bench_folder  # noqa: E402
from bench_server import (  # noqa: E402
    MODEL,
    Client,
    FakeProcess,
    cpu_seconds,
    django_configure,
    servers_start,
    step_works,
    token_create,
)

N = 1000
ROLES = ("user", "assistant")


def body_of(messages: int) -> dict:
    """A request with `messages` messages shaped as `bench/_setup.py`'s history (the step
    benchmark's), the last one the user's, streamed."""
    history = [
        {
            "role": ROLES[n % 2],
            "content": [{"type": "text", "text": f"message {n}: " + "lorem ipsum dolor sit amet " * 8}],
        }
        for n in range(messages - 1)
    ]
    history.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
    return {"model": MODEL, "max_tokens": 1024, "stream": True, "messages": history}


def per_call_ms(cpu: float, wall: float, n: int) -> str:
    return f"{1000 * cpu / n:.2f} ms CPU ({1000 * wall / n:.2f} ms wall)"


async def sdk_calls(url: str, n: int, body: dict) -> tuple[float, float]:
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="bench-key", base_url=url)
    encoded = json.dumps(body).encode()

    async def one() -> None:
        stream = await client.post(
            "/v1/messages",
            content=encoded,
            options={"headers": {"Content-Type": "application/json"}},
            cast_to=object,
            stream=True,
            stream_cls=anthropic.AsyncStream[object],
        )
        async for _event in stream:
            pass

    for _ in range(3):  # connections and imports warmed
        await one()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await one()
    return time.process_time() - cpu, time.perf_counter() - wall


async def provider_calls(url: str, n: int, body: dict) -> tuple[float, float]:
    from sessions_app.engine.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_key="bench-key", base_url=url)
    encoded = json.dumps(body).encode()

    async def on_text(_text: str) -> None:
        return None

    for _ in range(3):
        await provider.complete(body, on_text=on_text, encoded=encoded)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await provider.complete(body, on_text=on_text, encoded=encoded)
    return time.process_time() - cpu, time.perf_counter() - wall


def transactions(n: int) -> tuple[float, float]:
    from django.db import connection

    content = json.dumps([{"type": "text", "text": "ok, done."}])
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE floor_message (id INTEGER PRIMARY KEY, session TEXT, content TEXT)")
        cursor.execute("CREATE TABLE floor_session (id TEXT PRIMARY KEY, counter INTEGER)")
        cursor.execute("INSERT INTO floor_session VALUES ('s', 0)")

    def one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            cursor.execute("INSERT INTO floor_message (session, content) VALUES (%s, %s)", ["s", content])
            cursor.execute("UPDATE floor_session SET counter = counter + 1 WHERE id = %s", ["s"])
            cursor.execute("COMMIT")

    for _ in range(10):
        one()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        one()
    return time.process_time() - cpu, time.perf_counter() - wall


async def frame_round_trips(env: dict[str, str], folder: Path, fake: FakeProcess, n: int) -> float:
    """daphne's CPU (ms) per frame in and error frame out."""
    from asgiref.sync import sync_to_async

    token = await sync_to_async(token_create)()
    servers = servers_start(env, 1, folder, fake)
    try:
        client = Client(servers[0].ws_url, token)
        await client.open()
        pid = servers[0].process.pid if servers[0].process is not None else 0

        async def trip() -> None:
            await client.ws.send('{"type": "nope"}')
            frame = json.loads(await client.ws.recv())
            assert frame["type"] == "error", frame

        for _ in range(20):
            await trip()
        before = cpu_seconds(pid)
        for _ in range(n):
            await trip()
        used = cpu_seconds(pid) - before
        await client.close()
    finally:
        for server in servers:
            server.stop()
    return 1000 * used / n


async def stack_floor_turns(
    env: dict[str, str], folder: Path, fake: FakeProcess, histories: list[int], turns: int, warmup: int
) -> dict[int, tuple[float, float]]:
    """Per history size: daphne's CPU (ms) per one-step turn and the median server work (ms, as
    `bench_server.step_works` measures it) of the least turn on the stack (`_stack_floor.py`)."""
    from tests.servers import Daphne, server_env

    server = Daphne(
        server_env(**env, ANTHROPIC_BASE_URL=fake.url),
        folder / "stack-floor.log",
        app="bench._stack_floor:application",
    ).start()
    results: dict[int, tuple[float, float]] = {}
    try:
        pid = server.process.pid if server.process is not None else 0
        for history in histories:
            client = Client(server.ws_url, "")
            await client.open()
            await client.ws.send(json.dumps({"type": "floor.fill", "messages": history - 1}))
            assert json.loads(await client.ws.recv())["type"] == "floor.filled"
            works = []
            for index in range(warmup + turns):
                if index == warmup:
                    before = cpu_seconds(pid)
                fake.spans()
                times = await client.turn(f"go {index}")
                spans = fake.spans()
                if index >= warmup:
                    works.append((times["done"] - times["sent"] - (spans[0][1] - spans[0][0])) * 1000)
            results[history] = (1000 * (cpu_seconds(pid) - before) / turns, statistics.median(works))
            await client.close()
    finally:
        server.stop()
    return results


async def run(env: dict[str, str], folder: Path) -> None:
    fake = FakeProcess(0.0)
    try:
        sdk: dict[int, tuple[float, float]] = {}
        for messages, n in ((100, N), (10_000, N // 10)):
            body = body_of(messages)
            sdk[messages] = await sdk_calls(fake.url, n, body)
            print(f"SDK call, {messages:>6,} messages      {per_call_ms(*sdk[messages], n)}", flush=True)
            provider = await provider_calls(fake.url, n, body)
            print(f"provider call, {messages:>6,} messages {per_call_ms(*provider, n)}", flush=True)
            sdk[messages] = (sdk[messages][0] / n, 0.0)
        commit = await asyncio.to_thread(transactions, N)
        print(f"transaction (SQLite)             {per_call_ms(*commit, N)}", flush=True)
        frame = await frame_round_trips(env, folder, fake, N)
        print(f"frame round trip                 {frame:.2f} ms CPU of daphne", flush=True)
        floors = {m: 1000 * cpu + 2 * 1000 * commit[0] / N + frame for m, (cpu, _) in sdk.items()}
        print(
            "floor (SDK call + 2 transactions + 1 frame round trip): "
            f"{floors[100]:.2f} ms CPU per turn at 100 messages, {floors[10_000]:.2f} ms at 10,000 "
            f"(x{floors[10_000] / floors[100]:.2f})",
            flush=True,
        )
        stack = await stack_floor_turns(env, folder, fake, [100, 10_000], 200, 5)
        for messages, (cpu, work) in stack.items():
            print(
                f"the least turn on the stack (_stack_floor.py), {messages:,} messages: daphne CPU "
                f"{cpu:.2f} ms per turn (server work median {work:.1f} ms)",
                flush=True,
            )
        results = await step_works(env, folder, fake, [100, 10_000], 200, 5)
        for messages, (works, _fakes, cpu, _transits) in results.items():
            print(
                f"one-step turn, {messages:,} messages: daphne CPU {cpu:.2f} ms per turn (server work "
                f"median {statistics.median(works):.1f} ms): {cpu - floors[messages]:.2f} ms above the "
                f"floor, {cpu - stack[messages][0]:.2f} ms above the least turn on the stack"
            )
    finally:
        fake.stop()


def main() -> None:
    folder = bench_folder("palimpsest-floor-")
    env = django_configure(folder, "", "")
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 CPUs shared)", flush=True)
    asyncio.run(run(env, folder))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
