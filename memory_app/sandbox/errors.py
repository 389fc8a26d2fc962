"""The sandbox's errors: what a caller (the `run_sandbox_code` tool) turns into a tool error."""

from __future__ import annotations


class SandboxError(Exception):
    """The jail could not be set up or run (not the program's own failure: that is a result)."""


class SandboxUnavailable(SandboxError):
    """The sandbox is switched off (`PALIMPSEST_SANDBOX=off`) or cannot run on this host."""
