from __future__ import annotations

from typing import Any

import pytest

from sessions_app.engine.tools import ToolSpec
from tests.features import ECHO_TOOL


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
}
