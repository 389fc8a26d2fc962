"""SQLite gets the same options whichever way it is chosen (`PALIMPSEST_SQLITE_PATH`, or
`DATABASE_URL=sqlite:...`, both documented), so sessions writing at once through the services
queue for the write lock instead of failing with "database is locked" (issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config import settings as project_settings
from tests.servers import server_env

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def test_sqlite_chosen_by_url_gets_the_options_of_the_sqlite_path(tmp_path):
    path = str(tmp_path / "db.sqlite3")
    by_url = project_settings.database_from_env({"DATABASE_URL": f"sqlite:///{path}"})
    by_path = project_settings.database_from_env({"PALIMPSEST_SQLITE_PATH": path})
    assert by_url == by_path
    assert by_url["OPTIONS"] == project_settings.SQLITE_OPTIONS
    assert by_url["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in by_url["OPTIONS"]["init_command"]


def test_an_option_in_a_sqlite_url_is_kept_over_the_default(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}?timeout=3"
    options = project_settings.database_from_env({"DATABASE_URL": url})["OPTIONS"]
    assert options == {**project_settings.SQLITE_OPTIONS, "timeout": 3}


def test_a_postgresql_url_is_taken_as_it_is():
    database = project_settings.database_from_env({"DATABASE_URL": "postgres://u@db.example:5432/p"})
    assert (database["ENGINE"], database["NAME"], database["HOST"]) == (
        "django.db.backends.postgresql",
        "p",
        "db.example",
    )
    assert database["CONN_MAX_AGE"] == project_settings.DATABASE_CONN_MAX_AGE
    assert "transaction_mode" not in database.get("OPTIONS", {})


@pytest.mark.parametrize("way", ["DATABASE_URL", "PALIMPSEST_SQLITE_PATH"])
def test_sessions_writing_at_once_on_sqlite_never_fail_on_its_lock(tmp_path, way):
    """Children of one parent running turns at once, each thread on its own connection: every
    turn is stored, none fails with "database is locked" (with `DATABASE_URL=sqlite:...` the
    options were dropped: deferred transactions and a 5 s timeout failed most of them)."""
    path = tmp_path / "db.sqlite3"
    choice = f"sqlite:///{path}" if way == "DATABASE_URL" else str(path)
    env = server_env(**{way: choice})
    env.pop("PALIMPSEST_SQLITE_PATH" if way == "DATABASE_URL" else "DATABASE_URL", None)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BASE_DIR), env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "tests.sessions_app.sqlite_writers"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["turns"] == result["expected"] > 0
