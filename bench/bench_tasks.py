"""Task scoping's cost and saving (seed 000: begin_task / end_task): the same scripted work done
twice against the fake Messages API (which simulates prompt caching), once with each piece of
work scoped as a task and once without. Prints, per turn, the prompt tokens of the turn's first
request and what of it was read from the cache, then the session's totals."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from _setup import bench_folder, django_setup


def log_text(lines: int, tag: str) -> str:
    return "".join(
        f"{tag} {i:04d} INFO worker started job {i * 7919 % 10007} in 12 ms\n" for i in range(lines)
    )


def script(parts: int, reads: int, scoped: bool) -> list[list[Any]]:
    """Each turn's model replies, in order (the first turns do the work, the last two chat)."""
    from tests.fake_anthropic import text, tool_use

    turns = []
    for part in range(parts):
        steps = [tool_use("begin_task", {"name": f"part {part}"})] if scoped else []
        steps += [tool_use("fs_read", {"path": f"p{part}_{n}.log"}) for n in range(reads)]
        note = f"- part {part}: {reads} logs read, nothing alarming\n"
        steps.append(tool_use("update_notepad", {"operation": "append", "content": note}))
        if scoped:
            steps.append(tool_use("end_task", {"summary": f"Part {part}: read {reads} logs; no errors."}))
        steps.append(text(f"Part {part} is done."))
        turns.append(steps)
    turns += [[text("Next: the report.")], [text("Writing it now.")]]
    return turns


async def run(fake: Any, turns: list[list[Any]], scoped: bool) -> list[tuple[int, int, int, int]]:
    """(turn, steps, prompt tokens of its first request, cache reads of it) per turn."""
    from asgiref.sync import sync_to_async

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions

    session = await sync_to_async(engine_sessions.session_create)(
        owner=None,
        model="claude-sonnet-4-6",
        context_window=200_000,
        settings={"scratchpad": {"enabled": False}, "tasks": {"enabled": scoped}},
    )
    rows = []
    for number, replies in enumerate(turns):
        first = len(fake.requests)
        fake.enqueue(*replies)
        await runner.turn_start(session_id=session.id, content=f"turn {number}: survey part {number}")
        await runner.turns_wait_idle(timeout=60)
        usage = fake.requests[first].usage
        prompt = (
            usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        )
        rows.append((number, len(fake.requests) - first, prompt, usage["cache_read_input_tokens"]))
    return rows


def totals(fake: Any, start: int) -> tuple[int, int, int, int]:
    usages = [r.usage for r in fake.requests[start:]]
    prompt = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in usages
    )
    return (
        len(usages),
        prompt,
        sum(u["cache_read_input_tokens"] for u in usages),
        sum(u["cache_creation_input_tokens"] for u in usages),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--reads", type=int, default=3, help="logs read inside each piece of work")
    args = parser.parse_args()
    root = bench_folder("palimpsest-bench-logs-")
    for part in range(args.parts):
        for n in range(args.reads):
            (root / f"p{part}_{n}.log").write_text(log_text(40, f"P{part}.{n}"))
    django_setup(PALIMPSEST_PROVIDER="anthropic", ANTHROPIC_API_KEY="bench", PALIMPSEST_FS_ROOT=str(root))
    from django.conf import settings

    from tests.fake_anthropic import FakeAnthropicServer

    results = {}
    with FakeAnthropicServer() as fake:
        settings.ANTHROPIC_BASE_URL = fake.url
        settings.PALIMPSEST_FS_ROOT = str(root)
        for scoped in (False, True):
            start = len(fake.requests)
            rows = asyncio.run(run(fake, script(args.parts, args.reads, scoped), scoped))
            results[scoped] = (rows, totals(fake, start))
    head = ["turn", "steps without / with tasks", "1st request prompt tokens without", "with tasks"]
    print("| " + " | ".join([*head, "cache read without", "with tasks"]) + " |")
    print("|---:|---:|---:|---:|---:|---:|")
    for plain, task in zip(results[False][0], results[True][0], strict=True):
        cells = [f"{plain[1]} / {task[1]}", f"{plain[2]:,}", f"{task[2]:,}", f"{plain[3]:,}", f"{task[3]:,}"]
        print(f"| {plain[0]} | " + " | ".join(cells) + " |")
    print()
    print("| session | requests | prompt tokens | cache reads | cache writes | uncached + writes |")
    print("|---|---:|---:|---:|---:|---:|")
    for scoped, label in ((False, "without tasks"), (True, "with tasks")):
        count, prompt, read, write = results[scoped][1]
        print(f"| {label} | {count} | {prompt:,} | {read:,} | {write:,} | {prompt - read:,} |")


if __name__ == "__main__":
    main()
