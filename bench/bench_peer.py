"""Side by side with LangChain's Deep Agents (LangGraph, SQLite checkpointer): the same one-step
turns against the same fake Messages API, at the same history sizes, in one run.

    .venv/bin/pip install -e '.[bench]'      # deepagents, langchain-anthropic, the SQLite saver
    .venv/bin/python bench/bench_peer.py     # 100 and 10,000 stored messages

The fake (`bench/_fake_process.py`, answers "ok, done." at once) runs in a process of its own.
**Palimpsest**: `bench_server.py step`'s measure, end to end through a real daphne and the agent
websocket: the client's time from `user.message` to `turn.completed` minus the fake's own
handling of the turn's call. **Deep Agents**: `create_deep_agent` with `ChatAnthropic` (streaming,
the `anthropic` SDK pointed at the fake by `base_url`) and a `SqliteSaver` on a file, driven
in-process (`agent.invoke`, no server, no websocket: it has none of its own): the call's time
minus the fake's own handling. Both stored histories alternate user and assistant messages of
the same text; Deep Agents' model profile gets a 10M-token window so that its summarization
middleware does not run (Palimpsest's session gets the same window), and each turn is checked to
make exactly one model call. What the same long work costs each in input tokens under the prompt
cache (the cost mode): `bench_cost.py --peer`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from _setup import bench_folder
from bench_server import MODEL, FakeProcess, django_configure, percentile, step_works

TEXT = "lorem ipsum dolor sit amet " * 8  # as bench_server.history_fill


def peer_works(
    fake: FakeProcess, folder: Path, histories: list[int], turns: int, warmup: int
) -> dict[int, tuple[list[float], list[float]]]:
    """Per history size: Deep Agents' own time (ms) per one-step turn and the fake's (ms)."""
    from deepagents import create_deep_agent
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    model = ChatAnthropic(
        model=MODEL,
        base_url=fake.url,
        api_key="bench-key",
        streaming=True,
        max_retries=0,
        profile={"max_input_tokens": 10_000_000},
    )
    connection = sqlite3.connect(folder / "deepagents.sqlite3", check_same_thread=False)
    agent: Any = create_deep_agent(model=model, checkpointer=SqliteSaver(connection))
    results: dict[int, tuple[list[float], list[float]]] = {}
    for history in histories:
        config = {"configurable": {"thread_id": f"history-{history}"}}
        kinds = (HumanMessage, AIMessage)
        messages = [kinds[p % 2](content=f"message {p}: {TEXT}") for p in range(history)]
        agent.update_state(config, {"messages": messages})
        works, fakes = [], []
        for index in range(warmup + turns):
            fake.spans()
            began = time.monotonic()
            out = agent.invoke({"messages": [HumanMessage(content=f"go {index}")]}, config)
            took = time.monotonic() - began
            spans = fake.spans()
            assert len(spans) == 1, f"{len(spans)} model calls in one turn"
            assert len(out["messages"]) == history + 2 * (index + 1), len(out["messages"])
            if index < warmup:
                continue
            handled = spans[0][1] - spans[0][0]
            fakes.append(handled * 1000)
            works.append((took - handled) * 1000)
        results[history] = (works, fakes)
    connection.close()
    return results


def summary(works: list[float]) -> str:
    return (
        f"median {statistics.median(works):6.1f} ms "
        f"(quartiles {percentile(works, 0.25):.1f}-{percentile(works, 0.75):.1f}, {len(works)} turns)"
    )


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--history", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    try:
        import deepagents  # noqa: F401
    except ImportError:
        parser.exit(1, "deepagents is not installed: .venv/bin/pip install -e '.[bench]'\n")
    folder = bench_folder()
    env = django_configure(folder, "", "")
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 CPUs shared)", flush=True)
    fake = FakeProcess(0.0)
    try:
        ours = asyncio.run(step_works(env, folder, fake, args.history, args.turns, args.warmup))
        peer = peer_works(fake, folder, args.history, args.turns, args.warmup)
    finally:
        fake.stop()
    for history in args.history:
        mine, theirs = ours[history][0], peer[history][0]
        print(f"history {history:>6,} messages:")
        print(f"  Palimpsest (daphne + websocket) {summary(mine)}")
        print(f"  Deep Agents (in process)        {summary(theirs)}")
        print(
            f"  Deep Agents / Palimpsest: x{statistics.median(theirs) / statistics.median(mine):.2f}; "
            f"the fake's own time median {statistics.median(ours[history][1]):.1f} / "
            f"{statistics.median(peer[history][1]):.1f} ms"
        )
    if len(args.history) > 1:
        first, last = args.history[0], args.history[-1]
        grow = [statistics.median(r[last][0]) / statistics.median(r[first][0]) for r in (ours, peer)]
        print(f"growth {last:,} / {first:,} messages: Palimpsest x{grow[0]:.2f}, Deep Agents x{grow[1]:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
