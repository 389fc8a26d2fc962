"""Production settings: nothing insecure unless the local defaults are chosen explicitly, and
`check --deploy` clean with the environment docs/deploy.md documents."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
DEPLOY_DOC = BASE_DIR / "docs" / "deploy.md"
DEV_SECRET_KEY = "palimpsest-insecure-local-development-key-change-me"


def documented_env() -> dict[str, str]:
    """The production environment block of docs/deploy.md, placeholders filled in."""
    text = DEPLOY_DOC.read_text()
    block = re.search(
        r"<!-- production-env:start -->\n```sh\n(.*?)```\n<!-- production-env:end -->", text, re.S
    )
    assert block is not None, "docs/deploy.md lost its production environment block"
    env: dict[str, str] = {}
    for line in block.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, value = line.partition("=")
        env[name] = value
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    env["ANTHROPIC_API_KEY"] = "sk-test"
    return env


def run(args: list[str], env: dict[str, str], cwd: Path = BASE_DIR) -> subprocess.CompletedProcess[str]:
    # A clean environment: nothing of the test process (PALIMPSEST_DEV=1 above all) leaks in.
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=base | env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_the_documented_environment():
    done = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], documented_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_the_documented_environment_is_production(tmp_path):
    script = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.PALIMPSEST_SERVE_STATIC)"
    )
    env = documented_env() | {"DJANGO_SETTINGS_MODULE": "config.settings"}
    done = run(["-c", script], env)
    assert done.stdout.split() == ["False", "True", "True", "True", "False"], done.stderr


@pytest.mark.parametrize(
    ("drop", "extra", "message"),
    [
        ("SECRET_KEY", {}, "Set SECRET_KEY"),
        ("ALLOWED_HOSTS", {}, "Set ALLOWED_HOSTS"),
        (None, {"SECRET_KEY": DEV_SECRET_KEY}, "Set SECRET_KEY"),
    ],
)
def test_production_refuses_to_start_without_its_settings(drop, extra, message):
    env = documented_env() | extra
    if drop:
        env.pop(drop)
    done = run(["manage.py", "check"], env)
    assert done.returncode != 0
    assert message in done.stderr


def test_nothing_set_is_production_too():
    done = run(["manage.py", "check"], {})
    assert done.returncode != 0 and "PALIMPSEST_DEV=1" in done.stderr


def test_the_local_development_defaults_are_chosen_explicitly():
    script = (
        "import django; django.setup(); from django.conf import settings as s; print(s.DEBUG, s.SECRET_KEY)"
    )
    done = run(["-c", script], {"PALIMPSEST_DEV": "1", "DJANGO_SETTINGS_MODULE": "config.settings"})
    assert done.stdout.split() == ["True", DEV_SECRET_KEY], done.stderr


def test_collectstatic_gathers_what_the_proxy_serves(tmp_path):
    root = tmp_path / "static"
    done = run(
        ["manage.py", "collectstatic", "--noinput"], documented_env() | {"PALIMPSEST_STATIC_ROOT": str(root)}
    )
    assert done.returncode == 0, done.stderr
    for path in ("dashboard/dashboard.css", "dashboard/dashboard.js", "admin/css/base.css"):
        assert (root / path).is_file(), path
    assert list(root.glob("django_htmx/htmx-*.min.js")), "htmx and its ws extension"


def test_healthz_answers_plain_http_and_other_pages_redirect_to_https(tmp_path):
    script = (
        "import django; django.setup(); from django.test import Client; c = Client(); "
        "print(c.get('/healthz').status_code, c.get('/').status_code, "
        "c.get('/accounts/login/', headers={'x-forwarded-proto': 'https'}).status_code)"
    )
    env = documented_env() | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ALLOWED_HOSTS": "testserver",
        # /healthz asks the database for SELECT 1: an empty SQLite file answers that.
        "DATABASE_URL": "",
        "PALIMPSEST_SQLITE_PATH": str(tmp_path / "health.sqlite3"),
    }
    done = run(["-c", script], env)
    assert done.stdout.split() == ["200", "301", "200"], done.stderr
