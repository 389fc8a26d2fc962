"""Event latency to a watching browser (DESIGN.md, "Performance").

A real daphne process (DEBUG off, SQLite WAL, the scripted model) and Debian's chromium driven by
Playwright, logged in as an operator, on the session page's timeline. An agent client (websocket)
runs short turns (`echo ...`) one after another; optionally `--busy N` other sessions run turns
back to back at the same time, so the process is loaded. For every event of the watched session,
the latency is from the event's commit (its `ts`, taken by the server when the row is created) to
the moment its row is in the operator's page (a MutationObserver in the page notes `Date.now()`
when each timeline row arrives). Same machine, same clock. The agent client's own receipt of the
same event is measured the same way, for comparison: what the dashboard path (its consumer,
rendering the HTMX fragments, the swap) adds to a plain websocket frame.

Run: `.venv/bin/python bench/bench_browser_events.py` (`--turns 20 --busy 0`; `--busy 20`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from playwright.async_api import async_playwright
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _setup import bench_folder  # noqa: E402

from tests.servers import Daphne, manage, server_env  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
OPERATOR, PASSWORD = "operator", "operator-password-1"

# Notes when each timeline row (one event) first appears: seq → Date.now() in ms.
OBSERVER = """
() => {
  window.__seen = {};
  const note = (el) => {
    if (!(el instanceof Element)) return;
    const rows = el.matches('.tl-row') ? [el] : Array.from(el.querySelectorAll('.tl-row'));
    for (const row of rows) {
      if (row.hasAttribute('data-delta-group')) continue;
      const seq = row.querySelector(':scope > summary .seq');
      if (!seq) continue;
      const n = parseInt(seq.textContent.slice(1));
      if (!(n in window.__seen)) window.__seen[n] = Date.now();
    }
  };
  new MutationObserver((records) => {
    for (const r of records) r.addedNodes.forEach(note);
  }).observe(document.querySelector('#timeline-rows'), {childList: true, subtree: true});
}
"""


def ts_ms(frame: dict) -> float:
    return datetime.fromisoformat(frame["ts"]).timestamp() * 1000


async def open_client(server: Daphne, token: str):
    headers = {"Authorization": f"Bearer {token}"}
    return await connect(server.ws_url, additional_headers=headers, max_size=None)


async def recv_until(ws, frame_type: str, seen: list[tuple[dict, float]] | None = None) -> dict:
    while True:
        frame = json.loads(await ws.recv())
        if seen is not None and "seq" in frame:
            seen.append((frame, time.time() * 1000))
        if frame["type"] == frame_type:
            return frame


async def busy_loop(ws, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await ws.send(json.dumps({"type": "user.message", "content": "echo keeping the process busy"}))
        await recv_until(ws, "turn.completed")


def table_row(label: str, values: list[float]) -> str:
    if not values:
        return f"| {label} | 0 | — | — | — |"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    return f"| {label} | {len(ordered)} | {median:.1f} ms | {p95:.1f} ms | {ordered[-1]:.1f} ms |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns of the watched session")
    parser.add_argument("--busy", type=int, default=0, help="other sessions running turns meanwhile")
    parser.add_argument("--chunk-delay", type=float, default=0.01, help="scripted model's delay per piece")
    args = parser.parse_args()

    folder = bench_folder()
    env = server_env(
        PALIMPSEST_SQLITE_PATH=str(folder / "bench.sqlite3"),
        DEBUG="0",
        PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS=str(args.chunk_delay),
    )
    manage("migrate", "--noinput", env=env)
    manage(
        "createsuperuser",
        "--noinput",
        "--username",
        OPERATOR,
        "--email",
        "operator@example.com",
        env={**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
    )
    token = manage("create_agent_token", "bench", env=env).strip().splitlines()[-1]

    with Daphne(env, folder / "daphne.log") as server:
        base = f"http://127.0.0.1:{server.port}"
        agent = await open_client(server, token)
        await agent.send(json.dumps({"type": "session.create", "title": "watched"}))
        session_id = (await recv_until(agent, "session.created"))["session"]["id"]
        busy = []
        for index in range(args.busy):
            ws = await open_client(server, token)
            await ws.send(json.dumps({"type": "session.create", "title": f"busy {index}"}))
            await recv_until(ws, "session.created")
            busy.append(ws)

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
            )
            page = await browser.new_page(viewport={"width": 1440, "height": 900})
            await page.goto(base + "/")
            await page.fill("#id_username", OPERATOR)
            await page.fill("#id_password", PASSWORD)
            await page.click("button:has-text('Log in')")
            await page.wait_for_url(base + "/")
            await page.goto(f"{base}/sessions/{session_id}/?tab=timeline")
            await page.wait_for_selector("#live-dot.live")
            await page.evaluate(OBSERVER)

            stop = asyncio.Event()
            loops = [asyncio.create_task(busy_loop(ws, stop)) for ws in busy]
            received: list[tuple[dict, float]] = []
            for index in range(args.turns):
                await agent.send(json.dumps({"type": "user.message", "content": f"echo turn {index} " * 5}))
                await recv_until(agent, "turn.completed", received)
            await asyncio.sleep(1.0)  # the page's last rows
            stop.set()
            await asyncio.gather(*loops)
            seen: dict[str, float] = await page.evaluate("window.__seen")
            await browser.close()
        for ws in [agent, *busy]:
            await ws.close()

    to_browser: dict[str, list[float]] = defaultdict(list)
    to_agent: dict[str, list[float]] = defaultdict(list)
    missing = 0
    for frame, at in received:
        kind = "assistant.delta" if frame["type"] == "assistant.delta" else "other events"
        to_agent[kind].append(at - ts_ms(frame))
        shown = seen.get(str(frame["seq"]))
        if shown is None:
            missing += 1
            continue
        to_browser[kind].append(shown - ts_ms(frame))

    print(f"{args.turns} turns watched; {args.busy} other sessions busy; DEBUG off; SQLite WAL")
    print(f"events of the watched session: {len(received)}; not seen in the page: {missing}")
    print()
    print("| from the event's commit to | events | median | p95 | max |")
    print("|---|---:|---:|---:|---:|")
    for kind in ("other events", "assistant.delta"):
        print(table_row(f"the operator's page ({kind})", to_browser[kind]))
        print(table_row(f"the agent client ({kind})", to_agent[kind]))


if __name__ == "__main__":
    asyncio.run(main())
