from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg
import pytest

from sessions_app.engine.contract import ToolSpec
from tests.features import ECHO_TOOL
from tests.servers import manage, server_env


@pytest.fixture
def echo_tool(settings: Any) -> ToolSpec:
    """A server tool for exercising the tool path (a test feature): echoes `text`, fails on `fail`."""
    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "tests.features.ECHO_FEATURE"]
    return ECHO_TOOL


CLIENT_TOOL = {
    "name": "client_lookup",
    "description": "Look something up on the client.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


# Settings for tests that assert exact requests of the bare engine: no memory features, and no
# sub-session tools.
NO_MEMORY = {
    "notepad": {"enabled": False},
    "scratchpad": {"enabled": False},
    "sandbox": {"enabled": False},
    "subsessions": {"enabled": False},
    "tasks": {"enabled": False},
    "offload": {"enabled": False},
}


@pytest.fixture
def postgres_redis_env(tmp_path) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database (migrated) and the Redis channel layer, for daphne processes."""
    base = urlparse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/palimpsest"))
    # Unique: several checkouts may run their services tests on one server at once.
    name = f"palimpsest_e2e_{uuid.uuid4().hex[:12]}"
    admin_url = urlunparse(base._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    env = server_env(
        DATABASE_URL=urlunparse(base._replace(path=f"/{name}")),
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    )
    manage("migrate", "--noinput", env=env)
    yield env
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def is_summary_call(body: dict) -> bool:
    """A compaction's summary call, in either layout (`compaction.summary_call`): the separate one
    (seed 002's own system prompt) or the shared one (the session's layout, its last message the
    summary instruction)."""
    from sessions_app.engine.compaction.summary import is_shared_summary_text
    from sessions_app.engine.prompts import COMPACTION_SUMMARY_SYSTEM_PROMPT

    if body.get("system") == COMPACTION_SUMMARY_SYSTEM_PROMPT:
        return True
    last = body["messages"][-1]["content"] if body.get("messages") else None
    return isinstance(last, list) and any(
        isinstance(b, dict) and is_shared_summary_text(b.get("text", "")) for b in last
    )
