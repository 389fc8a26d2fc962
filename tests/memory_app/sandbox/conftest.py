"""Every test here runs real code in the real bubblewrap jail (nothing of bubblewrap is mocked)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from memory_app.sandbox.jail import sandbox_available

REQUIRE_SANDBOX = "PALIMPSEST_REQUIRE_SANDBOX"


@pytest.fixture(autouse=True)
def _sandbox_on(settings: Any) -> None:
    """The sandbox in `auto` mode; where it cannot run, a skip that says why (a failure with
    PALIMPSEST_REQUIRE_SANDBOX=1). test_sandbox_modes.py overrides this fixture."""
    settings.PALIMPSEST_SANDBOX = "auto"
    if not sandbox_available():
        reason = (
            "bubblewrap cannot run here (PALIMPSEST_SANDBOX=auto's trial run failed): see docs/sandbox.md"
        )
        if os.environ.get(REQUIRE_SANDBOX) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
