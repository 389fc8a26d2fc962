"""Benchmark: the operator's session page stays fast however long the session (issue 7).

Builds sessions of 100 to 50,000 stored messages (bulk inserts: alternating user and assistant
messages of about 60 tokens, one epoch) in a temporary SQLite database, then times a logged-in
GET of the session page, of the transcript's "older" page, and the rendering of the live
fragments the dashboard websocket pushes for one event. Run from the project root:

    .venv/bin/python bench/bench_dashboard.py [--repeat 20]

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

SIZES = (100, 1_000, 10_000, 50_000)


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm caches (SQLite pages, templates, query compilation)
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

    from django.contrib.auth import get_user_model
    from django.db.models import F
    from django.test import Client

    from sessions_app import services
    from sessions_app.common.estimate import estimate_json_tokens
    from sessions_app.dashboard.fragments import session_fragments
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.models import AgentSession, Message

    get_user_model().objects.create_user("bench", password="bench", is_staff=True)
    client = Client()
    assert client.login(username="bench", password="bench")

    print("| messages | session page | older page | fragments for one message event |")
    print("|---:|---:|---:|---:|")
    for size in SIZES:
        session = engine_sessions.session_create(owner=None, title=f"{size} messages")
        content = [{"type": "text", "text": "lorem ipsum dolor sit amet " * 10}]
        estimate = estimate_json_tokens(content)
        batch = 5000
        for start in range(0, size, batch):
            Message.objects.bulk_create(
                Message(
                    session=session,
                    position=i,
                    role="user" if i % 2 == 0 else "assistant",
                    content=content,
                    token_estimate=estimate,
                )
                for i in range(start, min(size, start + batch))
            )
        AgentSession.objects.filter(pk=session.pk).update(next_position=F("next_position") + size)
        url = f"/sessions/{session.pk}/"
        assert client.get(url).status_code == 200
        page = median_ms(partial(client.get, url), args.repeat)
        older = median_ms(partial(client.get, f"{url}transcript/?before={size // 2}"), args.repeat)
        event = services.event_emit(
            session_id=session.pk, type="assistant.message", payload={"content": content}
        )
        fragments = median_ms(
            partial(session_fragments, session_id=session.pk, events=[event], operator="bench"), args.repeat
        )
        print(f"| {size:,} | {page:.1f} ms | {older:.1f} ms | {fragments:.1f} ms |")


if __name__ == "__main__":
    main()
