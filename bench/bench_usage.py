"""Benchmark: reading sessions' usage from running totals versus summing their model calls.

Builds a page of sessions (the list's 50) with 10 to 2,000 recorded model calls each (bulk
inserts, in a temporary SQLite database), then times: the session list's query as it is (usage
from the running totals on the session, sorted by estimated cost); the same list with the four
token sums taken over each session's calls instead (what the totals save); and the write side,
one `model_call_record` (the call's row plus the totals' update, one transaction). Run from the
project root:

    .venv/bin/python bench/bench_usage.py [--repeat 20]

It prints a Markdown table (bench/README.md keeps the figures of a run).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _setup import django_setup

CALLS_PER_SESSION = (10, 200, 2_000)
SESSIONS = 50


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm caches
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    django_setup()

    from django.db import transaction
    from django.db.models import IntegerField, OuterRef, Subquery, Sum
    from django.db.models.functions import Coalesce
    from django.utils import timezone

    from sessions_app import services
    from sessions_app.common.types import ModelCallData
    from sessions_app.dashboard import selectors
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.models import AgentSession, ModelCall
    from sessions_app.services import steps

    def summed(field: str) -> Coalesce:
        total = (
            ModelCall.objects.filter(session=OuterRef("pk"))
            .order_by()
            .values("session")
            .annotate(n=Sum(field))
            .values("n")
        )
        return Coalesce(Subquery(total, output_field=IntegerField()), 0)

    def list_from_totals() -> list:
        return list(selectors.session_list(sort="-cost")[:SESSIONS])

    def list_from_sums() -> list:
        return list(
            selectors.session_list(sort="-activity")
            .annotate(
                sum_input=summed("input_tokens"),
                sum_output=summed("output_tokens"),
                sum_creation=summed("cache_creation_input_tokens"),
                sum_read=summed("cache_read_input_tokens"),
            )
            .order_by("-sum_input")[:SESSIONS]
        )

    call = ModelCallData(
        provider="anthropic",
        model="claude-sonnet-4-6",
        step=1,
        purpose="turn",
        request_record={"model": "claude-sonnet-4-6"},
        request_sha256="0" * 64,
        request_bytes=100,
        stable_prefix_bytes=0,
        estimated_prompt_tokens=1000,
        started_at=timezone.now(),
        duration_ms=1,
        first_token_ms=1,
        response=None,
        stop_reason="end_turn",
        usage={
            "input_tokens": 10,
            "output_tokens": 20,
            "cache_creation_input_tokens": 30,
            "cache_read_input_tokens": 40,
        },
    )

    def create_only(session_id: Any) -> None:
        with transaction.atomic():
            steps._model_call_create(session_id=session_id, turn_id=None, data=call)

    print(
        f"| calls per session ({SESSIONS} sessions) | list, usage from the totals "
        "| list, usage summed over the calls | one `model_call_record` | the call's row alone |"
    )
    print("|---:|---:|---:|---:|---:|")
    for calls in CALLS_PER_SESSION:
        AgentSession.objects.all().delete()
        sessions = [
            engine_sessions.session_create(owner=None, title=f"{calls} calls #{i}", model="claude-sonnet-4-6")
            for i in range(SESSIONS)
        ]
        rows = [
            ModelCall(
                session=session,
                provider="anthropic",
                model=session.model,
                request={},
                request_sha256="",
                input_tokens=index % 97,
                output_tokens=50,
                cache_creation_input_tokens=10,
                cache_read_input_tokens=1000,
            )
            for session in sessions
            for index in range(calls)
        ]
        ModelCall.objects.bulk_create(rows, batch_size=5000)
        from_totals = median_ms(list_from_totals, args.repeat)
        from_sums = median_ms(list_from_sums, args.repeat)
        target = sessions[0].pk
        recorded = partial(services.model_call_record, session_id=target, turn_id=None, data=call)
        record = median_ms(recorded, args.repeat)
        row_alone = median_ms(partial(create_only, target), args.repeat)
        print(
            f"| {calls:,} | {from_totals:.1f} ms | {from_sums:.1f} ms | {record:.2f} ms "
            f"| {row_alone:.2f} ms |"
        )


if __name__ == "__main__":
    main()
