"""Shared set-up for benchmarks: Django on a throw-away SQLite database, migrated."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def bench_folder(prefix: str = "palimpsest-bench-") -> Path:
    """A temporary folder for one run (its database, the servers' logs), removed when the run
    ends, however it ends; kept, and named, with BENCH_KEEP=1 (to read a server's log)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.environ.get("BENCH_KEEP"):
        atexit.register(print, f"kept: {folder}")
    else:
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def django_setup(**env: str) -> Path:
    """Configure Django for a benchmark run; returns the temporary folder it uses."""
    folder = bench_folder()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("PALIMPSEST_DEV", "1")  # the local development defaults, explicitly
    os.environ["PALIMPSEST_SQLITE_PATH"] = str(folder / "bench.sqlite3")
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(env)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return folder


def history_fill(session_id: Any, messages: int, *, context_window: int | None = None) -> None:
    """Store `messages` short alternating user/assistant messages in the session's epoch 0 (one
    bulk insert), as a benchmark's long history; optionally set its context window."""
    from sessions_app.common.estimate import estimate_json_tokens
    from sessions_app.models import AgentSession, Message

    rows = []
    for position in range(messages):
        role = "user" if position % 2 == 0 else "assistant"
        content = [{"type": "text", "text": f"message {position}: " + "lorem ipsum dolor sit amet " * 8}]
        rows.append(
            Message(
                session_id=session_id,
                position=position,
                epoch=0,
                role=role,
                content=content,
                token_estimate=estimate_json_tokens(content),
            )
        )
    Message.objects.bulk_create(rows, batch_size=2000)
    update: dict[str, Any] = {"next_position": messages}
    if context_window is not None:
        update["context_window"] = context_window
    AgentSession.objects.filter(pk=session_id).update(**update)
