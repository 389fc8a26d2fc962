"""The client against real daphne processes serving the project (tests/servers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import Daphne, manage, server_env


@pytest.fixture
def server_env_sqlite(tmp_path: Path) -> dict[str, str]:
    """A migrated SQLite database for the servers of one test."""
    env = server_env(PALIMPSEST_SQLITE_PATH=str(tmp_path / "client.sqlite3"))
    manage("migrate", "--noinput", env=env)
    return env


@pytest.fixture
def token(server_env_sqlite: dict[str, str]) -> str:
    return manage("create_agent_token", "client-tests", env=server_env_sqlite).strip().splitlines()[-1]


@pytest.fixture
def daphne(server_env_sqlite: dict[str, str], tmp_path: Path) -> Iterator[Daphne]:
    with Daphne(server_env_sqlite, tmp_path / "daphne.log") as server:
        yield server
