"""Memory of one real daphne process (`DEBUG=0`, SQLite WAL, the in-memory channel layer) per
idle attached connection and per idle session, against the fake Messages API in a process of its
own (real HTTP and SSE through the `anthropic` SDK), as `bench_server.py` runs them.

    .venv/bin/python bench/bench_memory.py                       # the defaults, about 2 minutes
    .venv/bin/python bench/bench_memory.py --connections 200 --burst 100 --sessions 1000   # quicker

Phases, each measured by the daphne process's RSS (`VmRSS`) once its clients are gone or idle:
1. idle: after one warm-up turn (imports, the SDK's client);
2. connections: N websockets, each with a new session, attached and idle; then closed;
3. turn bursts, two rounds: B connections with new sessions all send a one-step turn at once
   (the 500-session run of `bench_server.py concurrency`), then close. A second round that does
   not grow RSS shows that what the first left is the allocator keeping its high-water mark, not
   memory held per session;
4. idle sessions, two rounds: S sessions created over a few connections (`session.create`, so the
   process writes their rows and attaches each), one in `--turn-every` running one short turn,
   then detached (closed). A second round of S new sessions must not grow RSS beyond a small
   bound: the per-process caches are full after the first round and bounded
   (bench/README.md lists them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import bench_folder  # noqa: E402
from bench_server import (  # noqa: E402
    Client,
    FakeProcess,
    django_configure,
    rss_kib,
    servers_start,
    token_create,
)

# After the clients close, the server's disconnects and their database work settle this long.
SETTLE_SECONDS = 2.0
# Connections opened at once (the listen backlog).
CONNECT_BATCH = 50


async def settled_rss(pid: int) -> int:
    await asyncio.sleep(SETTLE_SECONDS)
    return rss_kib(pid)


async def clients_open(url: str, token: str, count: int) -> list[Client]:
    clients = [Client(url, token) for _ in range(count)]
    for start in range(0, count, CONNECT_BATCH):
        await asyncio.gather(*(c.open() for c in clients[start : start + CONNECT_BATCH]))
    return clients


async def clients_close(clients: list[Client]) -> None:
    await asyncio.gather(*(c.close() for c in clients))


async def sessions_round(url: str, token: str, sessions: int, connections: int, turn_every: int) -> int:
    """`sessions` new sessions over `connections` connections, each connection creating its
    share one after the other; every `turn_every`-th runs one turn. Returns the turns run."""
    turns = 0

    async def work(share: int) -> None:
        nonlocal turns
        client = Client(url, token)
        await client.open()
        for index in range(share):
            if index:
                await client.create_session()
            if index % turn_every == 0:
                await client.turn("go")
                turns += 1
        await client.close()

    shares = [sessions // connections + (1 if i < sessions % connections else 0) for i in range(connections)]
    await asyncio.gather(*(work(share) for share in shares if share))
    return turns


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


async def bench(args: argparse.Namespace, env: dict[str, str], folder: Path) -> None:
    from asgiref.sync import sync_to_async

    fake = FakeProcess(0.0)
    token = await sync_to_async(token_create)()
    (server,) = servers_start(env, 1, folder, fake)
    assert server.process is not None
    pid, url = server.process.pid, server.ws_url
    began = time.monotonic()

    def report(label: str, value: str) -> None:
        print(f"[{time.monotonic() - began:5.1f} s] {label}: {value}", flush=True)

    try:
        warm = Client(url, token)
        await warm.open()
        await warm.turn("warm up")
        await warm.close()
        idle = await settled_rss(pid)
        report("daphne RSS idle", mib(idle))

        clients = await clients_open(url, token, args.connections)
        attached = rss_kib(pid)
        per_connection = (attached - idle) / args.connections
        report(
            f"{args.connections:,} attached idle connections, each with its new session",
            f"{mib(attached)} (+{mib(attached - idle)}, {per_connection:.1f} KiB per connection)",
        )
        await clients_close(clients)
        after_connections = await settled_rss(pid)
        report("after they closed", mib(after_connections))

        burst_rss = []
        for number in (1, 2):
            burst = await clients_open(url, token, args.burst)
            await asyncio.gather(*(c.turn("go") for c in burst))
            during = rss_kib(pid)
            await clients_close(burst)
            burst_rss.append(await settled_rss(pid))
            report(
                f"turn burst {number}: {args.burst:,} sessions ran one turn at once",
                f"RSS with them attached {mib(during)}; after they closed {mib(burst_rss[-1])}",
            )

        session_rss = []
        for number in (1, 2):
            started = time.monotonic()
            turns = await sessions_round(url, token, args.sessions, args.session_connections, args.turn_every)
            took = time.monotonic() - started
            session_rss.append(await settled_rss(pid))
            report(
                f"sessions round {number}: {args.sessions:,} new sessions ({turns:,} ran a turn) in "
                f"{took:.1f} s, detached",
                mib(session_rss[-1]),
            )
    finally:
        server.stop()
        fake.stop()

    print()
    print(f"daphne RSS idle: {mib(idle)}")
    print(f"per attached idle connection with its session: {per_connection:.1f} KiB ({args.connections:,})")
    print(
        f"turn bursts of {args.burst:,}: after round 1 +{mib(burst_rss[0] - after_connections)}, "
        f"round 2 {burst_rss[1] - burst_rss[0]:+,} KiB"
    )
    first = session_rss[0] - burst_rss[1]
    second = session_rss[1] - session_rss[0]
    print(
        f"idle sessions ({args.sessions:,} a round): round 1 {first:+,} KiB "
        f"({first / args.sessions:.2f} KiB per session), round 2 {second:+,} KiB "
        f"({second / args.sessions:.2f} KiB per session)"
    )
    if second > args.bound_kib:
        print(f"FAILED: the second round of sessions grew RSS by more than {args.bound_kib:,} KiB")
        sys.exit(1)
    print(f"the second round of sessions grew RSS by at most {args.bound_kib:,} KiB: ok")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--connections", type=int, default=1000, help="idle attached connections")
    parser.add_argument("--burst", type=int, default=500, help="sessions of each turn burst")
    parser.add_argument("--sessions", type=int, default=10_000, help="new sessions of each round")
    parser.add_argument("--session-connections", type=int, default=10, help="connections creating them")
    parser.add_argument("--turn-every", type=int, default=20, help="one session in this many runs a turn")
    parser.add_argument(
        "--bound-kib", type=int, default=8192, help="the most a second round of sessions may grow RSS"
    )
    args = parser.parse_args()
    folder = bench_folder()
    env = django_configure(folder, "", "")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)", flush=True)
    asyncio.run(bench(args, env, folder))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
