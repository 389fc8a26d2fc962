"""What a fork of a huge history costs (issue 31, item 2): Python memory and database bytes.

A parent session holds `--messages` messages of `--mb` MB of text each (window 10,000,000) and a
last assistant message asking for `--forks` `fork_session` calls. Each fork is created as the
tool does it (`subsession_create`, mode fork), first one after another, then `--threads` at a
time (the database threads of one process). Reported: the peak of Python allocations during a
fork and what stays allocated after them (`tracemalloc`); the content the forks' messages read
as and the part their own rows hold (a copy shares its original's); and the database bytes each
fork added (SQLite: the pages of the file in use; PostgreSQL: `pg_total_relation_size` of the
message table, and the database's size).

Run: `.venv/bin/python bench/bench_fork.py` (`--messages 10 --mb 2 --forks 16 --threads 4`);
`--database-url postgres://...` runs it on an existing, empty PostgreSQL database instead of a
throw-away SQLite one. The fork limit (`subsessions.fork_max_tokens` and its service ceiling)
is raised for the run so that the copies are made; `--refused` keeps the defaults, so that every
fork is refused.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import django_setup  # noqa: E402

WINDOW = 10_000_000
# Common words drawn at random: text that tokenizes and compresses about as prose does.
_WORDS = (
    "the of and to in is was that for it with as his on be at by had are but from or have an they which "
    "one you were all we her she there would their will when who him been has more if no out do so can "
    "what up said about other into than its time only could new them man some these then two first may "
    "any like now my such make over our even most me state after also made many did must before back see "
    "through way where get much go well your know should down work year because come people just say each "
    "those take day good how long little use own great under last right place"
)
VOCABULARY = _WORDS.split()


def mb(n: float) -> str:
    return f"{n / 1024 / 1024:,.1f} MB"


def size(n: float) -> str:
    """MB, or KB below a tenth of one."""
    return mb(n) if abs(n) >= 0.1 * 1024 * 1024 else f"{n / 1024:,.1f} KB"


def parent_make(messages: int, size_mb: float, forks: int, *, refused: bool) -> Any:
    from sessions_app.common.estimate import estimate_json_tokens
    from sessions_app.models import AgentSession, Message

    settings: dict = {} if refused else {"subsessions": {"fork_max_tokens": WINDOW}}
    parent = AgentSession.objects.create(
        model="claude-sonnet-4-6", context_window=WINDOW, settings=settings, next_position=messages + 1
    )
    size = int(size_mb * 1024 * 1024)
    for position in range(messages):
        draw = random.Random(position)
        text = " ".join(draw.choices(VOCABULARY, k=size // 4))[:size]
        content = [{"type": "text", "text": text}]
        Message.objects.create(
            session=parent,
            position=position,
            role="user" if position % 2 == 0 else "assistant",
            content=content,
            token_estimate=estimate_json_tokens(content),
        )
    calls = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "fork_session", "input": {"task": "t"}}
        for i in range(forks)
    ]
    Message.objects.create(session=parent, position=messages, role="assistant", content=calls)
    return parent


def fork_one(parent_id: Any, index: int, defaults: Any) -> str:
    from django.db import connection

    from memory_app.subsessions import services

    try:
        services.subsession_create(
            parent_id=parent_id,
            tool_use_id=f"toolu_{index}",
            mode=services.MODE_FORK,
            task="t",
            settings_defaults=defaults,
        )
        return "created"
    except services.SubsessionRefused as exc:
        if index == 0:
            print(f"refused: {exc}")
        return "refused"
    finally:
        connection.close()


def content_bytes(parent_id: Any) -> tuple[int, int]:
    """The bytes of content the forks' rows hold themselves, and the bytes their messages read
    as (what they share resolved; the same where nothing is shared)."""
    from django.db import connection

    from sessions_app.models import Message

    children = [c.hex if connection.vendor == "sqlite" else c for c in _children(parent_id)]
    if not children:
        return 0, 0
    placeholders = ", ".join(["%s"] * len(children))
    sharing = any(f.name == "content_source" for f in Message._meta.get_fields())
    # A code base from before the sharing has no `content_source`: each row holds its content.
    resolved = (
        "COALESCE((SELECT h.content FROM sessions_app_message AS h WHERE h.id = m.content_source_id), "
        "m.content)"
        if sharing
        else "m.content"
    )
    sql = (
        "SELECT COALESCE(SUM(LENGTH(CAST(m.content AS TEXT))), 0), "
        f"COALESCE(SUM(LENGTH(CAST({resolved} AS TEXT))), 0) FROM sessions_app_message AS m "
        f"WHERE m.session_id IN ({placeholders})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, children)
        held, read = cursor.fetchone()
    return int(held), int(read)


def _children(parent_id: Any) -> list:
    from sessions_app.models import AgentSession

    return list(AgentSession.objects.filter(parent_session_id=parent_id).values_list("pk", flat=True))


def database_bytes() -> tuple[int, int | None]:
    """What the database stores: SQLite, the pages of its file in use (the file's size once
    checkpointed, less free pages); PostgreSQL, the message table with its indexes and
    out-of-line values (`pg_total_relation_size`), and the whole database's size."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_total_relation_size('sessions_app_message'), pg_database_size(current_database())"
            )
            table, database = cursor.fetchone()
            return int(table), int(database)
        sizes = []
        for pragma in ("page_count", "freelist_count", "page_size"):
            cursor.execute(f"PRAGMA {pragma}")
            sizes.append(int(cursor.fetchone()[0]))
    return (sizes[0] - sizes[1]) * sizes[2], None


def run(args: argparse.Namespace, parent_id: Any, defaults: Any, *, threads: int) -> None:
    gc.collect()
    bytes_before = database_bytes()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    if threads == 1:
        peaks = []
        outcomes = []
        for index in range(args.forks):
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            outcomes.append(fork_one(parent_id, index, defaults))
            peaks.append(tracemalloc.get_traced_memory()[1] - start)
        peak = max(peaks)
    else:
        tracemalloc.reset_peak()
        with ThreadPoolExecutor(threads) as pool:
            outcomes = list(pool.map(lambda i: fork_one(parent_id, i, defaults), range(args.forks)))
        peak = tracemalloc.get_traced_memory()[1] - base
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    bytes_after = database_bytes()
    held, read = content_bytes(parent_id)
    label = "one after another" if threads == 1 else f"{threads} at a time"
    created, refused = outcomes.count("created"), outcomes.count("refused")
    each = max(1, created)
    stored = f"database +{size((bytes_after[0] - bytes_before[0]) / each)} per fork"
    if bytes_before[1] is not None and bytes_after[1] is not None:
        stored = (
            f"message table +{size((bytes_after[0] - bytes_before[0]) / each)} per fork, "
            f"database +{size((bytes_after[1] - bytes_before[1]) / each)} per fork"
        )
    print(
        f"{args.forks} forks, {label}: {created} created, {refused} refused; "
        f"Python peak {'per fork' if threads == 1 else 'all together'} {mb(peak)}, kept after {mb(kept)}; "
        f"content read {mb(read / each)} per fork, held by the fork's rows {size(held / each)}; {stored}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--mb", type=float, default=2.0)
    parser.add_argument("--forks", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--refused", action="store_true")
    args = parser.parse_args()
    env = {"PALIMPSEST_PROVIDER": "scripted", "DEBUG": "0"}
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    if not args.refused:
        env["PALIMPSEST_FORK_MAX_TOKENS"] = str(WINDOW)
    django_setup(**env)

    from sessions_app.engine.features import features

    defaults = features().default_settings
    for threads in (1, args.threads):
        parent = parent_make(args.messages, args.mb, args.forks, refused=args.refused)
        run(args, parent.pk, defaults, threads=threads)


if __name__ == "__main__":
    main()
