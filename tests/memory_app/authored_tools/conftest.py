"""Authored tools run real code in the real bubblewrap jail: the sandbox tests' switch applies
(a skip saying why where bubblewrap cannot run, a failure with PALIMPSEST_REQUIRE_SANDBOX=1)."""

from __future__ import annotations

from tests.memory_app.sandbox.conftest import _sandbox_on  # noqa: F401 (an autouse fixture)
