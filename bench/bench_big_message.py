"""One big message must not stall everyone (issue 18, item 2).

A real daphne process (DEBUG off, SQLite WAL, the scripted model). Session A's client keeps
running short turns (`echo ping`, user.message → turn.completed) back to back, and a probe
requests `/healthz` every 20 ms. After a quiet baseline, session B's client (another
connection) sends an 8 MB `user.message`; the process takes it in (frame, estimate, the stored
message and its event, the request and its record, the answer) while A keeps going. Reported:
A's turn latency and `/healthz` latency in the quiet phase and while B's message is taken in
(from B's send to B's `turn.completed`), and how long B's message took.

B's message is `tool none <8 MB of text>`: the scripted model answers it in one short line (there
is no tool `none`), so what is measured is the intake, not an 8 MB answer streamed back.

Run: `.venv/bin/python bench/bench_big_message.py` (`--mb 8 --repeat 3 --quiet-seconds 5`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _setup import bench_folder  # noqa: E402

from tests.servers import Daphne, manage, server_env  # noqa: E402

HEALTHZ_EVERY_SECONDS = 0.02


class HealthProbe(threading.Thread):
    """GET /healthz every HEALTHZ_EVERY_SECONDS; keeps (start time, latency) of each."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            started = time.monotonic()
            with urllib.request.urlopen(self.url, timeout=60) as response:
                response.read()
            self.samples.append((started, time.monotonic() - started))
            self.stopped.wait(HEALTHZ_EVERY_SECONDS)


async def open_client(server: Daphne, token: str):
    return await connect(
        server.ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None
    )


async def recv_until(ws, frame_type: str) -> dict:
    while True:
        frame = json.loads(await ws.recv())
        if frame["type"] == frame_type:
            return frame


async def session_a_loop(ws, samples: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """Short turns back to back; keeps (start time, user.message → turn.completed) of each."""
    while not stop.is_set():
        started = time.monotonic()
        await ws.send(json.dumps({"type": "user.message", "content": "echo ping"}))
        await recv_until(ws, "turn.completed")
        samples.append((started, time.monotonic() - started))


def summary(samples: list[float]) -> str:
    if not samples:
        return "— | — | — | —"
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"{len(ordered)} | {statistics.median(ordered) * 1000:,.1f} ms | {p95 * 1000:,.1f} ms | "
        f"{ordered[-1] * 1000:,.1f} ms"
    )


def within(samples: list[tuple[float, float]], windows: list[tuple[float, float]]) -> list[float]:
    """Latencies of the samples that started inside one of `windows` or overlapped it."""
    return [
        latency
        for started, latency in samples
        if any(started <= end and started + latency >= begin for begin, end in windows)
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=8.0, help="size of B's message in MB")
    parser.add_argument("--repeat", type=int, default=3, help="big messages sent, one after another")
    parser.add_argument("--quiet-seconds", type=float, default=5.0)
    args = parser.parse_args()

    folder = bench_folder()
    env = server_env(PALIMPSEST_SQLITE_PATH=str(folder / "bench.sqlite3"), DEBUG="0")
    manage("migrate", "--noinput", env=env)
    token = manage("create_agent_token", "bench", env=env).strip().splitlines()[-1]
    filler = "lorem ipsum dolor sit amet " * int(args.mb * 1_000_000 / 27)
    big = "tool none " + filler

    with Daphne(env, folder / "daphne.log") as server:
        a = await open_client(server, token)
        await a.send(json.dumps({"type": "session.create", "title": "A"}))
        await recv_until(a, "session.created")
        b = await open_client(server, token)
        await b.send(json.dumps({"type": "session.create", "title": "B", "context_window": 10_000_000}))
        await recv_until(b, "session.created")

        probe = HealthProbe(server.port)
        probe.start()
        turns: list[tuple[float, float]] = []
        stop = asyncio.Event()
        loop_a = asyncio.create_task(session_a_loop(a, turns, stop))

        quiet_start = time.monotonic()
        await asyncio.sleep(args.quiet_seconds)
        quiet = [(quiet_start, time.monotonic())]
        loaded: list[tuple[float, float]] = []
        intake: list[float] = []
        for _ in range(args.repeat):
            sent = time.monotonic()
            await b.send(json.dumps({"type": "user.message", "content": big}))
            completed = await recv_until(b, "turn.completed")
            assert completed["stop_reason"] == "end_turn", completed
            loaded.append((sent, time.monotonic()))
            intake.append(time.monotonic() - sent)
            await asyncio.sleep(1.0)  # A and the probe see the process settle between messages
        stop.set()
        await loop_a
        probe.stopped.set()
        probe.join()
        await a.close()
        await b.close()

    print(f"B's message: {len(big):,} characters; {args.repeat} sent; DEBUG off; SQLite WAL")
    print(f"B's send → turn.completed: {', '.join(f'{s:.2f} s' for s in intake)}")
    print()
    print("| measured | phase | samples | median | p95 | max |")
    print("|---|---|---:|---:|---:|---:|")
    print(f"| A: user.message → turn.completed | quiet | {summary(within(turns, quiet))} |")
    print(f"| A: user.message → turn.completed | B's message taken in | {summary(within(turns, loaded))} |")
    print(f"| GET /healthz | quiet | {summary(within(probe.samples, quiet))} |")
    print(f"| GET /healthz | B's message taken in | {summary(within(probe.samples, loaded))} |")


if __name__ == "__main__":
    asyncio.run(main())
