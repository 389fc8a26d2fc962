"""A long session through the real engine and SDK against the fake Messages API.

Thousands of steps with small and large messages; the fake server counts tokens its own way
(cl100k scaled by --ratio, as Claude's tokenizer counts more than cl100k). Checks that no request
exceeds the context window, and reports how far the calibrated estimate was from the server's
count and what compaction cost. Run: `.venv/bin/python bench/bench_compaction.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

from _setup import django_setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1500)
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--ratio", type=float, default=1.3, help="server tokens per cl100k token")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    django_setup(PALIMPSEST_PROVIDER="anthropic", ANTHROPIC_API_KEY="bench")
    from django.conf import settings

    from tests.fake_anthropic import FakeAnthropicServer, text

    rng = random.Random(args.seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    ]

    def prose(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))

    def reply(body: dict[str, Any]) -> Any:
        if body.get("system") and "Summarize this conversation" in str(body["system"]):
            return text(prose(150, 300))
        # Mostly short answers, sometimes a long one.
        return text(prose(800, 1600) if rng.random() < 0.2 else prose(10, 80))

    with FakeAnthropicServer(token_ratio=args.ratio) as fake:
        settings.ANTHROPIC_BASE_URL = fake.url
        fake.default_reply = reply
        started = time.perf_counter()
        asyncio.run(run_session(args, fake, reply, prose, rng))
        elapsed = time.perf_counter() - started
    report(args, fake, elapsed)


async def run_session(
    args: argparse.Namespace, fake: Any, reply: Any, prose: Any, rng: random.Random
) -> None:
    from asgiref.sync import sync_to_async

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions

    session = await sync_to_async(engine_sessions.session_create)(
        owner=None, model="claude-sonnet-4-6", context_window=args.window, compact_threshold=args.threshold
    )
    for turn in range(args.turns):
        content = prose(400, 1200) if rng.random() < 0.15 else prose(5, 60)
        await runner.turn_start(session_id=session.id, content=f"turn {turn}: {content}")
        await runner.turns_wait_idle(timeout=60)


def report(args: argparse.Namespace, fake: Any, elapsed: float) -> None:
    from sessions_app.models import Archive, ModelCall

    calls = list(ModelCall.objects.order_by("started_at"))
    turn_calls = [c for c in calls if c.purpose == "turn"]
    summaries = [c for c in calls if c.purpose == "summary"]
    served = [c.prompt_tokens for c in turn_calls]
    over = [s for s in served if s > args.window]
    # The first call of a session or an epoch has no exact base: it is estimated whole (cl100k
    # scaled by the calibrated ratio); every other call adds the estimated difference to the
    # previous call's exact count.
    epoch_starts = [a.created_at for a in Archive.objects.order_by("created_at")]
    firsts = {turn_calls[0].pk} | {
        next(c.pk for c in turn_calls if c.started_at > start)
        for start in epoch_starts
        if start < turn_calls[-1].started_at
    }
    based: list[float] = []
    whole: list[float] = []
    for call in turn_calls:
        error = abs(call.predicted_prompt_tokens - call.prompt_tokens) / call.prompt_tokens
        (whole if call.pk in firsts else based).append(error)
    based.sort()
    whole.sort()
    summary_in = sum(c.prompt_tokens for c in summaries)
    total_in = sum(c.prompt_tokens for c in calls)
    archives = Archive.objects.count()
    print(
        f"turns: {args.turns}, model calls: {len(calls)} ({len(turn_calls)} turn, {len(summaries)} summary)"
    )
    print(f"window: {args.window} tokens, threshold {args.threshold}, server/cl100k ratio {args.ratio}")
    largest = max(served)
    print(
        f"largest prompt: {largest} tokens ({largest / args.window:.1%} of the window); over it: {len(over)}"
    )
    for name, errors in (("with an exact base", based), ("first of an epoch", whole)):
        p95 = errors[int(0.95 * (len(errors) - 1))]
        print(
            f"estimate error |predicted - served| / served, {name} ({len(errors)} calls): "
            f"mean {statistics.mean(errors):.2%}, p95 {p95:.2%}, max {errors[-1]:.2%}"
        )
    print(f"compactions: {archives}; every {len(turn_calls) / max(archives, 1):.1f} model calls")
    share = summary_in / total_in
    per_summary = sum(c.duration_ms for c in summaries) / max(len(summaries), 1)
    print(f"compaction cost: summary calls read {summary_in} of {total_in} prompt tokens ({share:.1%}), ")
    print(f"{per_summary:.0f} ms per summary call")
    per_call = 1000 * elapsed / len(calls)
    print(f"wall time: {elapsed:.1f} s ({per_call:.1f} ms per model call, fake model included)")
    assert not over, f"{len(over)} requests exceeded the context window"


if __name__ == "__main__":
    main()
