"""What `recall` costs at scale (issue 34): search latency and index size at 10,000 and 1,000,000
stored messages, on SQLite (FTS5) and PostgreSQL (a GIN expression index).

`--messages` are stored in all: nine in ten over one agent's `--sessions` sessions, the rest in a
session of another owner's agent of the same name (never searched). Each message is 40-80 words
drawn from a 20,000-word vocabulary with a Zipf-like skew (common words common, most words rare),
written with its search document as the services write them (`Message` rows, then `RecallDocument`
rows: the database's own index is kept by its triggers on SQLite, by the GIN index on PostgreSQL).
Reported: the search documents' table and its full-text index in bytes; the median and 95th
percentile of `recall_search` (the selector the tool and the dashboard call, limit 5, the agent's
scope) over `--queries` queries of one rare word, two words, and three common words; and how long
the load took.

Run: `.venv/bin/python bench/bench_recall.py --messages 10000` (a throw-away SQLite database);
`--database-url postgres://postgres@127.0.0.1:5432/NAME` on an existing, empty PostgreSQL database;
`--sqlite-path FILE` keeps the SQLite file (a second run only measures: a million messages take
minutes to load), as an existing PostgreSQL database is kept.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import django_setup  # noqa: E402

VOCABULARY = 20_000
BATCH = 5_000


def words_for(seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        seen.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return sorted(seen)


def load(messages: int, sessions: int, seed: int) -> float:
    """Store `messages` messages with their search documents: nine in ten over `sessions`
    sessions of one agent, the rest in one session of another owner's agent; the seconds it
    took."""
    from django.db import transaction
    from django.utils import timezone

    from sessions_app.common.estimate import estimate_json_tokens
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.models import Agent, AgentSession, Message, RecallDocument

    vocabulary = words_for(seed)
    rng = random.Random(seed)
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(VOCABULARY)))
    mine = Agent.objects.create(owner_name="bench", name="reader")
    theirs = Agent.objects.create(owner_name="other", name="reader")
    targets = [engine_sessions.session_create(owner=None, agent=mine) for _ in range(sessions)]
    targets.append(engine_sessions.session_create(owner=None, agent=theirs))
    started = time.perf_counter()
    others = messages // 10
    per_session = max(1, (messages - others) // sessions)
    for session in targets:
        total = others if session.agent_id == theirs.pk else per_session
        for start in range(0, total, BATCH):
            count = min(BATCH, total - start)
            rows, texts = [], []
            for position in range(start, start + count):
                text = " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(40, 80)))
                content = [{"type": "text", "text": text}]
                rows.append(
                    Message(
                        session_id=session.pk,
                        position=position,
                        epoch=position // 200,
                        role="user" if position % 2 == 0 else "assistant",
                        content=content,
                        token_estimate=estimate_json_tokens(content),
                    )
                )
                texts.append(text)
            with transaction.atomic():
                stored = Message.objects.bulk_create(rows)
                now = timezone.now()
                RecallDocument.objects.bulk_create(
                    RecallDocument(
                        session_id=session.pk,
                        epoch=m.epoch,
                        message_id=m.pk,
                        kind="message",
                        role=m.role,
                        at=now,
                        text=text,
                    )
                    for m, text in zip(stored, texts, strict=True)
                )
        AgentSession.objects.filter(pk=session.pk).update(next_position=total, epoch=total // 200)
    return time.perf_counter() - started


def index_bytes() -> dict[str, int]:
    """The search documents' table and its full-text index, in bytes."""
    from django.db import connection

    from sessions_app.recall_models import RECALL_FTS_TABLE

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_relation_size('sessions_app_recalldocument'), "
                "pg_total_relation_size('sessions_app_recalldocument'), "
                "COALESCE((SELECT SUM(pg_relation_size(indexrelid)) FROM pg_index i "
                " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                " WHERE i.indrelid = 'sessions_app_recalldocument'::regclass AND a.amname = 'gin'), 0)"
            )
            table, total, gin = cursor.fetchone()
            return {
                "documents table": int(table),
                "full-text index (GIN)": int(gin),
                "all, with indexes": int(total),
            }
        cursor.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        sizes = {name: int(size) for name, size in cursor.fetchall()}
    fts = sum(size for name, size in sizes.items() if name.startswith(RECALL_FTS_TABLE))
    table = sizes.get("sessions_app_recalldocument", 0)
    return {"documents table": table, "full-text index (FTS5)": fts}


def queries_for(seed: int, count: int) -> list[tuple[str, str]]:
    vocabulary = words_for(seed)
    rng = random.Random(seed + 1)
    common, rare = vocabulary[:50], vocabulary[5_000:]
    kinds = []
    for _ in range(count):
        kinds.append(("one rare word", rng.choice(rare)))
        kinds.append(("two words", f"{rng.choice(common)} {rng.choice(rare)}"))
        kinds.append(("three common words", " ".join(rng.sample(common, 3))))
    return kinds


def measure(seed: int, count: int) -> dict[str, dict[str, float]]:
    from sessions_app.models import Agent
    from sessions_app.recall_selectors import recall_search

    agent = Agent.objects.get(owner_name="bench", name="reader")
    recall_search(query="warm up", agent=agent)
    times: dict[str, list[float]] = {}
    for kind, query in queries_for(seed, count):
        started = time.perf_counter()
        hits = recall_search(query=query, limit=5, agent=agent)
        times.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        assert all(h.session_id for h in hits)
    return {
        kind: {"median ms": statistics.median(v), "p95 ms": sorted(v)[int(len(v) * 0.95) - 1]}
        for kind, v in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--queries", type=int, default=20, help="of each kind")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--database-url", default="")
    parser.add_argument(
        "--sqlite-path",
        default="",
        help="a SQLite file to keep: loaded on the first run, only measured on the next ones",
    )
    args = parser.parse_args()
    env = {"PALIMPSEST_PROVIDER": "scripted", "DEBUG": "0"}
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    if args.sqlite_path:
        env["PALIMPSEST_SQLITE_PATH"] = args.sqlite_path
    django_setup(**env)
    from django.db import connection

    from sessions_app.models import Agent

    loaded = Agent.objects.filter(owner_name="bench", name="reader").exists()
    seconds = 0.0 if loaded else load(args.messages, args.sessions, args.seed)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE sessions_app_recalldocument")
    report: dict[str, Any] = {
        "database": connection.vendor,
        "messages stored": args.messages,
        "load seconds": round(seconds, 1) if not loaded else "(loaded before)",
        "bytes": index_bytes(),
        "latency": measure(args.seed, args.queries),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
