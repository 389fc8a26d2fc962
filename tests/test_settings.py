"""Server-wide settings read from the environment (config/settings.py): their defaults, a value
from the environment, and a bad value stopping the start with a message that names it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # A clean environment with the local development defaults: only `env` differs between runs.
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PALIMPSEST_DEV": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    return subprocess.run(
        [sys.executable, *args], cwd=BASE_DIR, env=base | env, capture_output=True, text=True, timeout=120
    )


def setting_value(name: str, env: dict[str, str]) -> str:
    script = f"import django; django.setup(); from django.conf import settings; print(repr(settings.{name}))"
    done = run(["-c", script], env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# -- PALIMPSEST_COMPACT_THRESHOLD (seed 002's compactThreshold) -----------------------------------
def test_compact_threshold_defaults_to_seed_002s_80_percent():
    assert setting_value("PALIMPSEST_COMPACT_THRESHOLD", {}) == "0.8"


@pytest.mark.parametrize(("raw", "value"), [("0.6", "0.6"), ("1", "1.0"), ("0.05", "0.05"), ("", "0.8")])
def test_compact_threshold_from_the_environment(raw, value):
    assert setting_value("PALIMPSEST_COMPACT_THRESHOLD", {"PALIMPSEST_COMPACT_THRESHOLD": raw}) == value


@pytest.mark.parametrize("raw", ["0", "-0.5", "1.5", "80", "abc", "nan", "inf"])
def test_a_bad_compact_threshold_stops_the_start(raw):
    done = run(["manage.py", "check"], {"PALIMPSEST_COMPACT_THRESHOLD": raw})
    assert done.returncode != 0
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "django.core.exceptions.ImproperlyConfigured: PALIMPSEST_COMPACT_THRESHOLD must be"
    )
    assert last_line.endswith(f"got {raw!r}")


# -- PALIMPSEST_RETENTION_DAYS (DESIGN.md "Operating Palimpsest": off by default) -----------------
@pytest.mark.parametrize(("raw", "value"), [(None, "None"), ("", "None"), ("0", "None"), ("30", "30")])
def test_retention_is_off_unless_set(raw, value):
    env = {} if raw is None else {"PALIMPSEST_RETENTION_DAYS": raw}
    assert setting_value("PALIMPSEST_RETENTION_DAYS", env) == value


@pytest.mark.parametrize("raw", ["-1", "abc", "1.5"])
def test_a_bad_retention_stops_the_start(raw):
    done = run(["manage.py", "check"], {"PALIMPSEST_RETENTION_DAYS": raw})
    assert done.returncode != 0
    assert "PALIMPSEST_RETENTION_DAYS must be" in done.stderr.strip().splitlines()[-1]
