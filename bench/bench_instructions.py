"""Instructions per one-step turn, counted by valgrind's callgrind: a measure of a turn's work that
does not drift with the machine's speed.

    .venv/bin/python bench/bench_instructions.py            # needs valgrind (Debian: valgrind)
    .venv/bin/python bench/bench_instructions.py --history 10000 --turns 20

The machines these benchmarks run on are shared: the same code measured minutes apart took 6.6
and 10.7 ms of CPU a turn (bench/README.md, round 9), so a change worth a few percent cannot be
seen in CPU time without many alternated runs. The number of instructions a turn executes is the
same from run to run within about 1.5%.

Each run starts one daphne (`DEBUG=0`, SQLite WAL, as `bench_server.py`) under
`valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes`, drives one session
through `--warmup` one-step turns (not counted), then counts `--turns` more, one after the other,
against the fake Messages API in a process of its own (not counted): the server's whole turn,
the server with only the engine's core feature (`bench/_settings_core.py`: no notepad,
scratchpad, tasks, files, observations, sandbox or sub-sessions: the features' share), and the
least turn on the stack (`_stack_floor.py`, as `bench_floor.py`).

Printed per run: instructions per turn in all, on the event loop's thread (websocket frames,
the SDK's HTTP, the consumer and the runner) and on the other threads (the database threads:
every transaction and the request's build), and two libraries' shares. valgrind's CPU model has
no SHA extensions: OpenSSL's SHA-256 (the request's hash for its record, and its tools' part's)
runs its generic code there, about twenty times the instructions it takes on a CPU that has them
(`libcrypto`, counted apart). Instructions are not time: code run cold (a turn runs a great many
distinct pieces of code once) costs more per instruction than a loop, so the CPU ratio between
two turns is larger than their instructions' ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _setup import bench_folder, history_fill  # noqa: E402
from bench_server import Client, FakeProcess, django_configure, token_create  # noqa: E402

from tests.servers import WS_LIMIT, free_port, server_env  # noqa: E402

RUNS = {
    "the server": ("config.asgi:application", "config.settings"),
    "the server, core feature only": ("config.asgi:application", "bench._settings_core"),
    "the least turn on the stack": ("bench._stack_floor:application", "config.settings"),
}
LIBRARIES = ("libsqlite3", "libcrypto")


def callgrind_daphne(env: dict[str, str], app: str, out: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """daphne under callgrind, counting nothing until told to (`callgrind_control -i on`)."""
    port = free_port()
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}.%p",
        sys.executable,
        str(Path(sys.executable).with_name("daphne")),
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "--websocket-max-message-size",
        WS_LIMIT,
        "--websocket-max-frame-size",
        WS_LIMIT,
        app,
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600  # Django's start is ~50 times slower under valgrind
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                if response.status == 200:
                    return process, f"ws://127.0.0.1:{port}/ws/agent/"
        except OSError:
            time.sleep(1)
    process.kill()
    raise RuntimeError("daphne did not start under valgrind")


def counted(path: Path) -> int:
    """The instructions a callgrind output file counted (its `totals:`, or its `summary:`)."""
    lines = path.read_text().splitlines()
    counts = [int(line.split()[1]) for line in lines if line.startswith(("summary:", "totals:"))]
    return max(counts, default=0)


def by_library(path: Path) -> dict[str, int]:
    """The instructions of `LIBRARIES` in a callgrind output file (`callgrind_annotate`)."""
    listing = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found = dict.fromkeys(LIBRARIES, 0)
    for line in listing.splitlines():
        match = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+.*\[(.*)\]\s*$", line)
        if match:
            for library in LIBRARIES:
                if library in match.group(2).rsplit("/", 1)[-1]:
                    found[library] += int(match.group(1).replace(",", ""))
    return found


async def count_run(
    env: dict[str, str], folder: Path, fake: FakeProcess, token: str, name: str, args: argparse.Namespace
) -> dict[str, float]:
    from asgiref.sync import sync_to_async

    app, settings_module = RUNS[name]
    base = server_env(**env, ANTHROPIC_BASE_URL=fake.url, DJANGO_SETTINGS_MODULE=settings_module)
    base["PALIMPSEST_POLL_SECONDS"] = "1.0"
    out = folder / f"callgrind-{len(list(folder.glob('callgrind-*')))}"
    process, url = await asyncio.to_thread(callgrind_daphne, base, app, out, folder / "daphne.log")
    try:
        client = Client(url, token)
        await client.open()
        if "stack_floor" in app:  # its history lives in its memory
            await client.ws.send(json.dumps({"type": "floor.fill", "messages": args.history - 1}))
            assert json.loads(await client.ws.recv())["type"] == "floor.filled"
        else:
            await sync_to_async(history_fill)(client.session_id, args.history, context_window=10_000_000)
        for index in range(args.warmup):
            await client.turn(f"go {index}")
        control = ["callgrind_control", "-i"]
        subprocess.run([*control, "on", str(process.pid)], check=True, capture_output=True)
        for index in range(args.turns):
            await client.turn(f"go {args.warmup + index}")
        subprocess.run([*control, "off", str(process.pid)], check=True, capture_output=True)
        await client.close()
    finally:
        process.terminate()
        process.wait(120)
    files = sorted(folder.glob(f"{out.name}.{process.pid}-*"))
    threads = {path.name.rsplit("-", 1)[1]: counted(path) for path in files}
    libraries = dict.fromkeys(LIBRARIES, 0)
    for path in files:
        for library, count in by_library(path).items():
            libraries[library] += count
    per_turn = 1e6 * args.turns
    return {
        "all": sum(threads.values()) / per_turn,
        "loop": threads.get("01", 0) / per_turn,  # the main thread: daphne's event loop
        "others": (sum(threads.values()) - threads.get("01", 0)) / per_turn,
        **{library: count / per_turn for library, count in libraries.items()},
    }


async def run(env: dict[str, str], folder: Path, args: argparse.Namespace) -> None:
    from asgiref.sync import sync_to_async

    token = await sync_to_async(token_create)()
    fake = FakeProcess(0.0)
    try:
        results = {}
        for name in RUNS:
            results[name] = found = await count_run(env, folder, fake, token, name, args)
            print(
                f"{name}, {args.history:,} messages: {found['all']:.2f} M instructions per turn "
                f"(event loop {found['loop']:.2f} M, other threads {found['others']:.2f} M; "
                f"SQLite {found['libsqlite3']:.2f} M, OpenSSL {found['libcrypto']:.2f} M)",
                flush=True,
            )
        ours, least = results["the server"], results["the least turn on the stack"]
        core = results["the server, core feature only"]
        without = (ours["all"] - ours["libcrypto"]) / (least["all"] - least["libcrypto"])
        print(
            f"the server / the least turn: x{ours['all'] / least['all']:.2f} "
            f"(without OpenSSL: x{without:.2f}); "
            f"the features: {ours['all'] - core['all']:.2f} M a turn"
        )
    finally:
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("bench_instructions.py needs valgrind (Debian: apt-get install valgrind)")
    folder = bench_folder("palimpsest-instructions-")
    env = django_configure(folder, "", "")
    asyncio.run(run(env, folder, args))


if __name__ == "__main__":
    main()
