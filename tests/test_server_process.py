"""A server process loads its model provider at start and keeps what it loaded out of the cyclic
garbage collector's walks (`config/server_process.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SCRIPT = """
import gc, sys
import config.asgi
from config.server_process import GC_THRESHOLDS
print(gc.get_freeze_count() > 50_000, gc.get_threshold() == GC_THRESHOLDS, "anthropic" in sys.modules)
# Cycles made after the start are still collected.
import weakref
class Node: pass
a, b = Node(), Node(); a.b, b.a = b, a
alive = weakref.ref(a)
del a, b
gc.collect()
print(alive() is None)
"""


def _python(script: str, **env: str) -> str:
    """`script` run by a fresh Python in a clean environment (the local development defaults
    and `env`); its output."""
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PALIMPSEST_DEV": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=BASE_DIR,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def served(provider: str) -> list[str]:
    return _python(SCRIPT, PALIMPSEST_PROVIDER=provider).split()


def test_the_server_process_freezes_what_it_loaded_with_the_sdk_of_its_provider():
    assert served("anthropic") == ["True", "True", "True", "True"]


def test_a_scripted_server_process_does_not_load_the_sdk():
    frozen, thresholds, sdk, collected = served("scripted")
    assert (frozen, thresholds, sdk, collected) == ("True", "True", "False", "True")


def _db_threads(**env: str) -> str:
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.PALIMPSEST_DB_THREADS)"
    )
    return _python(script, **env).strip()


def test_the_database_threads_default_to_two_on_sqlite_and_four_on_postgresql():
    """SQLite has one writer: more threads than two only wait; PostgreSQL writes in parallel."""
    assert _db_threads() == "2"
    assert _db_threads(DATABASE_URL="postgres://postgres@127.0.0.1:5432/unused") == "4"
    assert _db_threads(DATABASE_URL="sqlite:////tmp/palimpsest-unused.sqlite3") == "2"  # SQLite either way
    assert _db_threads(PALIMPSEST_DB_THREADS="6") == "6"
