"""End to end through real daphne processes and the agent websocket, against the fake Messages API
(real HTTP and SSE through the `anthropic` SDK) running in a process of its own.

    .venv/bin/python bench/bench_server.py step        # work per one-step turn, 100 / 10,000 messages
    .venv/bin/python bench/bench_server.py concurrency --sessions 500     # one daphne, SQLite
    .venv/bin/python bench/bench_server.py concurrency --sessions 1000 --processes 2 \\
        --database-url postgres://postgres@127.0.0.1:5432/palimpsest_bench --redis-url redis://127.0.0.1:6379/5

`step`: one session per history size; its history is bulk-inserted, then one-step turns ("ok,
done.") are sent one after the other. Server work per turn = the client's time from sending
`user.message` to receiving `turn.completed`, minus the fake's own handling time of that turn's
model call (from the request's arrival to the end of its stream). The first turns (which load
the history) are not counted. Median and quartiles.

`concurrency`: N sessions, one websocket each (spread over the daphne processes), all idle and
attached; then every client sends its message at once, against a model that answers after
`--latency` seconds. Prints when the last turn completed (from the first message sent), the
time to each session's first `assistant.delta` (p50 / p99), and the daphne processes' RSS: idle,
with N attached connections and their sessions, after the turns, after the clients left.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import Daphne, server_env  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _setup import bench_folder, history_fill  # noqa: E402

MODEL = "claude-sonnet-4-5"


class FakeProcess:
    """`bench/_fake_process.py`: the fake in its own process."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "_fake_process.py"), str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def spans(self) -> list[tuple[float, float, float]]:
        """[start, end, headers] of the calls answered since the last call, the model's latency
        left out (`headers`: when the request's headers had arrived, its body then in transit)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        return [(s, e - self.latency, h) for s, e, h in json.loads(self.process.stdout.readline())]

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=10)


def django_configure(folder: Path, database_url: str, redis_url: str) -> dict[str, str]:
    """Configure Django in this process on the database the servers use, migrate, and return the
    servers' environment."""
    env = {
        "PALIMPSEST_DEV": "1",
        "DEBUG": "0",
        "PALIMPSEST_SQLITE_PATH": str(folder / "bench.sqlite3"),
        "PALIMPSEST_PROVIDER": "anthropic",
        "ANTHROPIC_API_KEY": "bench-key",
        "PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE": "100000",
        "PALIMPSEST_QUOTA_CONNECTIONS": "100000",
        "PALIMPSEST_QUOTA_FRAMES_PER_SECOND": "100000",
        "PALIMPSEST_SANDBOX": "off",
    }
    if database_url:
        env["DATABASE_URL"] = database_url
    if redis_url:
        env["REDIS_URL"] = redis_url
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not database_url:
        for name in ("DATABASE_URL",):
            os.environ.pop(name, None)
    import django
    from django.core.management import call_command

    django.setup()
    if database_url:
        from django.db import connection

        with connection.cursor() as cursor:  # a fresh schema for each run
            cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    call_command("migrate", verbosity=0)
    return env


def token_create() -> str:
    from sessions_app import services

    return services.agent_token_create(name="bench")[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user + system, all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    """One agent websocket attached to one session."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.ws: Any = None
        self.session_id = ""

    async def open(self) -> None:
        import websockets

        self.ws = await websockets.connect(
            self.url,
            additional_headers={"Authorization": f"Bearer {self.token}"},
            max_size=2**25,
            open_timeout=60,
            ping_interval=None,
        )
        await self.create_session()

    async def create_session(self) -> None:
        """A new session, attached to this connection instead of the one it had."""
        await self.ws.send(json.dumps({"type": "session.create", "model": MODEL}))
        while True:
            frame = json.loads(await self.ws.recv())
            if frame["type"] == "session.created":
                self.session_id = frame["session"]["id"]
                return
            if frame["type"] == "error":
                raise RuntimeError(frame)

    async def turn(self, content: str) -> dict[str, float]:
        """Send a message; times (monotonic) of the send, the first delta and turn.completed."""
        sent = time.monotonic()
        await self.ws.send(json.dumps({"type": "user.message", "content": content}))
        first_delta = 0.0
        while True:
            frame = json.loads(await self.ws.recv())
            if frame["type"] == "assistant.delta" and not first_delta:
                first_delta = time.monotonic()
            elif frame["type"] == "turn.completed":
                if frame["stop_reason"] != "end_turn":
                    raise RuntimeError(frame)
                return {"sent": sent, "first_delta": first_delta, "done": time.monotonic()}
            elif frame["type"] == "error":
                raise RuntimeError(frame)

    async def close(self) -> None:
        await self.ws.close()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def servers_start(
    env: dict[str, str], processes: int, folder: Path, fake: FakeProcess, app: str = "config.asgi:application"
) -> list[Daphne]:
    base = server_env(**env, ANTHROPIC_BASE_URL=fake.url)
    base["PALIMPSEST_POLL_SECONDS"] = os.environ.get("BENCH_POLL_SECONDS", "1.0")  # the production default
    return [Daphne(base, folder / f"daphne{i}.log", app=app).start() for i in range(processes)]


IDLE_SECONDS = 3.0


async def step_works(
    env: dict[str, str], folder: Path, fake: FakeProcess, histories: list[int], turns: int, warmup: int
) -> dict[int, tuple[list[float], list[float], float, list[float]]]:
    """Per history size: the server work (ms) of each measured one-step turn, the fake's own
    time (ms) of its call, the daphne process's CPU time per turn (ms, all its threads), and the
    time (ms) each request's body was in transit (from its headers' arrival at the fake to its
    last byte's: part of the server work), through one daphne against `fake` (the model's
    latency, `fake.latency`, is not server work)."""
    from asgiref.sync import sync_to_async

    token = await sync_to_async(token_create)()
    servers = servers_start(env, 1, folder, fake)
    results: dict[int, tuple[list[float], list[float], float, list[float]]] = {}
    try:
        for history in histories:
            client = Client(servers[0].ws_url, token)
            await client.open()
            await sync_to_async(history_fill)(client.session_id, history, context_window=10_000_000)
            works, fakes, transits = [], [], []
            pid = servers[0].process.pid if servers[0].process is not None else 0
            for index in range(warmup + turns):
                if index == warmup and fake.latency:
                    # What daphne spends at rest (timers, the token re-check, the sweeps) is
                    # in its CPU per turn too, for as long as the model takes: measured alone.
                    idle_before = cpu_seconds(pid)
                    await asyncio.sleep(IDLE_SECONDS)
                    print(
                        f"history {history:>6,} messages: daphne at rest "
                        f"{1000 * (cpu_seconds(pid) - idle_before) / IDLE_SECONDS:.1f} ms CPU per second",
                        flush=True,
                    )
                if index == warmup:
                    cpu_before = cpu_seconds(pid)
                fake.spans()
                times = await client.turn(f"go {index}")
                spans = fake.spans()
                if index < warmup:
                    continue
                assert len(spans) == 1, spans
                handled = spans[0][1] - spans[0][0]
                fakes.append(handled * 1000)
                transits.append((spans[0][0] - spans[0][2]) * 1000)
                works.append((times["done"] - times["sent"] - handled - fake.latency) * 1000)
            cpu = (cpu_seconds(pid) - cpu_before) * 1000 / turns
            await client.close()
            results[history] = (works, fakes, cpu, transits)
    finally:
        for server in servers:
            server.stop()
    return results


async def step_bench(args: argparse.Namespace, env: dict[str, str], folder: Path) -> None:
    fake = FakeProcess(args.latency if args.latency is not None else 0.0)
    try:
        results = await step_works(env, folder, fake, args.history, args.turns, args.warmup)
    finally:
        fake.stop()
    for history, (works, fakes, cpu, transits) in results.items():
        print(
            f"history {history:>6,} messages: server work per one-step turn "
            f"median {statistics.median(works):.1f} ms "
            f"(quartiles {percentile(works, 0.25):.1f}-{percentile(works, 0.75):.1f}, "
            f"{len(works)} turns; of it the request's body in transit {statistics.median(transits):.1f} ms), "
            f"daphne CPU {cpu:.1f} ms per turn; the fake's own time median {statistics.median(fakes):.1f} ms",
            flush=True,
        )
    sizes = list(results)
    if len(sizes) > 1:
        ratio = statistics.median(results[sizes[-1]][0]) / statistics.median(results[sizes[0]][0])
        print(f"ratio {sizes[-1]:,} / {sizes[0]:,} messages: x{ratio:.2f}")


async def concurrency_bench(args: argparse.Namespace, env: dict[str, str], folder: Path) -> None:
    from asgiref.sync import sync_to_async

    fake = FakeProcess(args.latency if args.latency is not None else 1.0)
    tokens = [await sync_to_async(token_create)() for _ in range(args.processes)]
    servers = servers_start(env, args.processes, folder, fake, app=args.app)
    pids = [s.process.pid for s in servers if s.process is not None]
    try:
        # Warm each process up (imports, the SDK's client) with one turn.
        for server, token in zip(servers, tokens, strict=True):
            warm = Client(server.ws_url, token)
            await warm.open()
            await warm.turn("warm up")
            await warm.close()
        idle = [rss_kib(p) for p in pids]
        clients = [
            Client(servers[i % len(servers)].ws_url, tokens[i % len(servers)]) for i in range(args.sessions)
        ]
        for start in range(0, len(clients), 50):  # connect in batches (the listen backlog)
            await asyncio.gather(*(c.open() for c in clients[start : start + 50]))
        attached = [rss_kib(p) for p in pids]
        fake.spans()
        cpu_before = [cpu_seconds(p) for p in pids]
        harness_before = (time.process_time(), cpu_seconds(fake.process.pid))
        if os.environ.get("BENCH_TURNS_MARK"):  # for a profiler: the turns begin now
            Path(os.environ["BENCH_TURNS_MARK"]).write_text(" ".join(map(str, pids)))
        began = time.monotonic()
        times = await asyncio.gather(*(c.turn("go") for c in clients))
        cpu = [cpu_seconds(p) - b for p, b in zip(pids, cpu_before, strict=True)]
        harness = (time.process_time() - harness_before[0], cpu_seconds(fake.process.pid) - harness_before[1])
        first_sent = min(t["sent"] for t in times)
        last_done = max(t["done"] for t in times)
        deltas = [t["first_delta"] - t["sent"] for t in times]
        after = [rss_kib(p) for p in pids]
        spans = fake.spans()
        await asyncio.gather(*(c.close() for c in clients))
        await asyncio.sleep(2)
        left = [rss_kib(p) for p in pids]
    finally:
        for server in servers:
            server.stop()
        fake.stop()
    handled = [e - s for s, e, _ in spans]
    # When each model call reached the model (the fake's clock is the same monotonic clock):
    # a first delta can come no sooner than this plus the model's latency.
    arrived = [s - first_sent for s, _, _ in spans]
    print(
        f"{args.sessions} sessions on {args.processes} process(es), model latency {fake.latency:g} s: "
        f"all turns done {last_done - first_sent:.2f} s after the first message "
        f"(sending all took {max(t['sent'] for t in times) - began:.2f} s)"
    )
    print(
        f"first assistant.delta after the message: p50 {percentile(deltas, 0.5):.2f} s, "
        f"p99 {percentile(deltas, 0.99):.2f} s, max {max(deltas):.2f} s; "
        f"the fake's own time per call: median {1000 * statistics.median(handled):.1f} ms"
    )
    print(
        f"the model calls reached the model after the first message: p50 {percentile(arrived, 0.5):.2f} s, "
        f"p99 {percentile(arrived, 0.99):.2f} s, last {max(arrived):.2f} s"
    )
    print(
        f"daphne CPU during the turns: {', '.join(f'{c:.2f} s' for c in cpu)} "
        f"({1000 * sum(cpu) / args.sessions:.1f} ms per turn); on the same cores, the clients "
        f"{harness[0]:.2f} s and the fake {harness[1]:.2f} s"
    )
    per_connection = (sum(attached) - sum(idle)) / args.sessions
    print(
        f"daphne RSS (KiB, per process): idle {idle}, {args.sessions} attached {attached} "
        f"({per_connection:.1f} KiB per attached connection with its new session), "
        f"after the turns {after}, after the clients left {left}"
    )


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("mode", choices=["step", "concurrency"])
    parser.add_argument("--history", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument(
        "--latency",
        type=float,
        default=None,
        help="the model's latency in seconds (default: 0 for step, 1 for concurrency); the fake "
        "then sends its short answer whole, which a turn stores with its step, its text included "
        "(no assistant.delta write of its own)",
    )
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--app",
        default="config.asgi:application",
        help="the ASGI application daphne serves (concurrency); bench._stack_floor:application is "
        "the least turn on the stack (bench_floor.py), to run the same load against",
    )
    parser.add_argument("--database-url", default="", help="PostgreSQL (default: a temporary SQLite file)")
    parser.add_argument("--redis-url", default="", help="the channel layer (needed for --processes > 1)")
    args = parser.parse_args()
    if args.processes > 1 and not (args.database_url and args.redis_url):
        parser.error("several processes need --database-url and --redis-url")
    folder = bench_folder()
    env = django_configure(folder, args.database_url, args.redis_url)
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 CPUs shared)", flush=True)
    bench = step_bench if args.mode == "step" else concurrency_bench
    asyncio.run(bench(args, env, folder))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
