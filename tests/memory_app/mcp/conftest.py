"""Every MCP test ends with the process's servers stopped: none outlives its test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory_app.mcp.manager import mcp_manager_reset
from tests.dashboard.conftest import operator, operator_client  # noqa: F401 (the dashboard's fixtures)


@pytest.fixture(autouse=True)
def _mcp_servers_stopped() -> Iterator[None]:
    mcp_manager_reset()
    yield
    mcp_manager_reset()
