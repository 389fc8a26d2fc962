"""Shared set-up for benchmarks: Django on a throw-away SQLite database, migrated."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup(**env: str) -> Path:
    """Configure Django for a benchmark run; returns the temporary folder it uses."""
    folder = Path(tempfile.mkdtemp(prefix="palimpsest-bench-"))
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
