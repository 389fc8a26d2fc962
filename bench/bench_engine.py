"""Server overhead of the turn engine, with models that cost nothing or wait.

1. Overhead of one model step with a zero-latency model, for a history of 1,000 and of 10,000
   messages: everything the server does around the call (lease, request building, recording,
   storing, events), per step and per turn.
2. Concurrent sessions in one process against a model that takes 1 s to answer.
3. The stable-prefix ratio of a long scripted session: the share of each request identical to
   the start of the previous one (what prompt caching can reuse).

Run: `.venv/bin/python bench/bench_engine.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from _setup import django_setup, history_fill


class ZeroModel:
    """Answers at once without reading the request: what is measured is the server alone."""

    name = "zero"

    def __init__(self, steps_per_turn: int = 1) -> None:
        self.steps_per_turn = steps_per_turn
        self.calls = 0

    async def complete(self, body: dict[str, Any], *, on_text: Any = None, encoded: Any = None) -> Any:
        from sessions_app.engine.providers.base import ModelResponse, Usage

        self.calls += 1
        if on_text is not None:
            await on_text("ok")
        if self.calls % self.steps_per_turn:
            content = [
                {"type": "tool_use", "id": f"toolu_zero{self.calls}", "name": "bench_noop", "input": {}}
            ]
            return ModelResponse(content=content, stop_reason="tool_use", usage=Usage(input_tokens=1000))
        return ModelResponse(
            content=[{"type": "text", "text": "ok"}], stop_reason="end_turn", usage=Usage(1000, 1)
        )


class SlowModel:
    name = "slow"

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def complete(self, body: dict[str, Any], *, on_text: Any = None, encoded: Any = None) -> Any:
        from sessions_app.engine.providers.base import ModelResponse, Usage

        await asyncio.sleep(self.latency)
        return ModelResponse(
            content=[{"type": "text", "text": "done"}], stop_reason="end_turn", usage=Usage(100, 1)
        )


async def overhead(history: int, turns: int, steps: int) -> dict[str, float]:
    from asgiref.sync import sync_to_async

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions

    session = await sync_to_async(engine_sessions.session_create)(
        owner=None, model="bench", context_window=10_000_000
    )
    await sync_to_async(history_fill)(session.id, history)
    model = ZeroModel(steps_per_turn=steps)
    durations = []
    for index in range(turns):
        started = time.perf_counter()
        turn_id = await runner.turn_start(session_id=session.id, content=f"go {index}", provider=model)
        await runner.turns_wait_idle(timeout=120)
        durations.append(time.perf_counter() - started)
        assert turn_id
    per_turn = statistics.median(durations[1:])
    return {"turn_ms": 1000 * per_turn, "step_ms": 1000 * per_turn / steps}


async def concurrency(sessions: int, latency: float) -> float:
    from asgiref.sync import sync_to_async

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions

    model = SlowModel(latency)
    ids = [
        (await sync_to_async(engine_sessions.session_create)(owner=None, model="bench")).id
        for _ in range(sessions)
    ]
    started = time.perf_counter()
    for session_id in ids:
        await runner.turn_start(session_id=session_id, content="go", provider=model)
    await runner.turns_wait_idle(timeout=600)
    return time.perf_counter() - started


async def stable_prefix(turns: int) -> tuple[float, float]:
    from asgiref.sync import sync_to_async

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.models import ModelCall

    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted")
    for index in range(turns):
        content = [
            f"remember: finding {index}",
            "plan: read; fix; test",
            f"note: step {index}",
            "echo hi",
        ][index % 4]
        await runner.turn_start(session_id=session.id, content=content)
        await runner.turns_wait_idle(timeout=60)
    queryset = ModelCall.objects.filter(session=session).order_by("started_at")[1:]
    calls: list[ModelCall] = await sync_to_async(lambda: list(queryset))()
    ratios = [c.stable_prefix_bytes / c.request_bytes for c in calls]
    return statistics.mean(ratios), min(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--steps", type=int, default=5, help="model steps per turn (tool loop)")
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    django_setup(PALIMPSEST_PROVIDER="scripted")

    from django.conf import settings

    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "bench.features.NOOP_FEATURE"]

    print(f"1. server overhead, zero-latency model, {args.steps} model steps a turn (median):")
    for history in (1_000, 10_000):
        figures = asyncio.run(overhead(history, args.turns, args.steps))
        step, turn = figures["step_ms"], figures["turn_ms"]
        print(f"   history {history:>6,} messages: {step:.1f} ms per step, {turn:.1f} ms per turn")
    elapsed = asyncio.run(concurrency(args.sessions, 1.0))
    print(f"2. {args.sessions} concurrent sessions, model latency 1 s: all turns done in {elapsed:.2f} s")
    mean, low = asyncio.run(stable_prefix(60))
    print(f"3. stable prefix over 60 scripted turns with memory in use: mean {mean:.1%}, lowest {low:.1%}")


if __name__ == "__main__":
    main()
