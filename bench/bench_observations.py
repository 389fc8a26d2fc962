"""Benchmark: a scratchpad_read slice costs O(slice), not O(observation) (DESIGN.md, Performance).

Stores a 100 KB and a 100 MB text observation (and a 100 MB binary one) in a temporary SQLite
database, then times each read mode on both and measures its peak Python memory (tracemalloc).
Run from the project root:

    .venv/bin/python bench/bench_observations.py [--big-mb 100] [--repeat 20]

It prints a Markdown table (bench/README.md keeps the figures of a run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(db_path: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["PALIMPSEST_SQLITE_PATH"] = db_path
    os.environ.pop("DATABASE_URL", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def log_text(size: int) -> str:
    """Log lines up to `size` characters, one ERROR line in the middle and one at the end."""
    line = "INFO 2026-04-26 10:00:01 worker=17 request handled in 12 ms, status=200 path=/api/items\n"
    lines = size // len(line)
    middle = lines // 2
    body = [line] * lines
    body[middle] = "ERROR 2026-04-26 12:00:00 worker=3 database timeout after 30000 ms, retrying ......\n"
    body[-1] = "ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT .........................................\n"
    return "".join(body)


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(median milliseconds over `repeat` runs, peak KiB of Python allocations in one run)."""
    fn()  # warm the SQLite page cache and Django's query compilation
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small-kb", type=int, default=100)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        setup_django(str(Path(folder) / "bench.sqlite3"))
        run(args)


def run(args: argparse.Namespace) -> None:
    from memory_app.observations.content import ResultParts
    from memory_app.observations.grep import observation_grep
    from memory_app.observations.models import ObservationKind
    from memory_app.observations.selectors import observation_read, observation_read_lines
    from memory_app.observations.services import observation_create
    from sessions_app.models import AgentSession, Turn

    session = AgentSession.objects.create(model="scripted", context_window=200_000)
    turn = Turn.objects.create(session=session)
    stored = {}
    sizes = {f"{args.small_kb} KB": args.small_kb * 1000, f"{args.big_mb} MB": args.big_mb * 1_000_000}
    for label, size in sizes.items():
        text = log_text(size)
        started = time.perf_counter()
        stored[label] = observation_create(
            session_id=session.id,
            turn_id=turn.id,
            step=1,
            tool_name="fs_read",
            tool_use_id=f"toolu_{label}",
            parts=ResultParts(ObservationKind.TEXT, text=text),
            ttl_seconds=3600,
        )
        print(
            f"stored {label} text ({len(text):,} chars) in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        del text
    big_binary = os.urandom(args.big_mb * 1_000_000)
    started = time.perf_counter()
    binary = observation_create(
        session_id=session.id,
        turn_id=turn.id,
        step=2,
        tool_name="fs_read",
        tool_use_id="toolu_binary",
        parts=ResultParts(ObservationKind.BINARY, data=big_binary),
        ttl_seconds=3600,
    )
    print(f"stored {args.big_mb} MB binary in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    del big_binary

    def reads(observation: Any) -> dict[str, Callable[[], Any]]:
        middle_char = observation.char_count // 2
        middle_line = observation.line_count // 2
        return {
            "head n=2000": lambda: observation_read(observation=observation, mode="head", arguments={}),
            "tail n=2000": lambda: observation_read(observation=observation, mode="tail", arguments={}),
            "range 2000 in the middle": lambda: observation_read(
                observation=observation,
                mode="range",
                arguments={"start": middle_char, "end": middle_char + 2000},
            ),
            "lines 100 in the middle": lambda: observation_read_lines(
                observation=observation, start_line=middle_line, end_line=middle_line + 99
            ),
        }

    rows: list[tuple[str, float | None, float | None, float, float]] = []
    small_label, big_label = sizes
    small, big = reads(stored[small_label]), reads(stored[big_label])
    for name in small:
        small_ms, small_kib = measure(small[name], args.repeat)
        big_ms, big_kib = measure(big[name], args.repeat)
        rows.append((f"text {name}", small_ms, small_kib, big_ms, big_kib))
    binary_reads = {
        "head n=2000": lambda: observation_read(observation=binary, mode="head", arguments={}),
        "range 2000 in the middle": lambda: observation_read(
            observation=binary,
            mode="range",
            arguments={"start": binary.char_count // 2, "end": binary.char_count // 2 + 2000},
        ),
    }
    for name, fn in binary_reads.items():
        ms, kib = measure(fn, args.repeat)
        rows.append((f"binary {name}", None, None, ms, kib))

    def grep(label: str) -> Callable[[], Any]:
        return lambda: observation_grep(observation=stored[label], pattern="ERROR", max_matches=500)

    small_ms, small_kib = measure(grep(small_label), 3)
    big_ms, big_kib = measure(grep(big_label), 1)
    rows.append(("text grep ERROR (streams every chunk)", small_ms, small_kib, big_ms, big_kib))
    big_result = grep(big_label)()

    def cell(value: float | None, unit: str) -> str:
        return "—" if value is None else f"{value:,.2f} {unit}"

    print(
        f"| read | {small_label}: time | {small_label}: peak memory "
        f"| {big_label}: time | {big_label}: peak memory |"
    )
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row[0]} | {cell(row[1], 'ms')} | {cell(row[2], 'KiB')} | {cell(row[3], 'ms')} | "
            f"{cell(row[4], 'KiB')} |"
        )
    print(f"\n{big_label} grep: {big_result['matches']} matches, stopped: {big_result.get('stopped', 'no')}")


if __name__ == "__main__":
    main()
