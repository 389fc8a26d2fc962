"""The code sandbox (seed 000's `run_sandbox_code`) as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.sandbox import limits
from memory_app.sandbox.scripted import rule_run
from memory_app.sandbox.tools import RUN_SANDBOX_CODE_TOOL
from sessions_app.engine.contract import Feature

SETTINGS = {
    "sandbox": {
        "enabled": True,
        "timeout_seconds": limits.SANDBOX_DEFAULT_TIMEOUT_SECONDS,
        "memory_mb": limits.SANDBOX_DEFAULT_MEMORY_MB,
    }
}
SETTINGS_RULES = {
    "sandbox": {
        "enabled": ("bool",),
        "timeout_seconds": ("int", limits.SANDBOX_MIN_TIMEOUT_SECONDS, limits.SANDBOX_MAX_TIMEOUT_SECONDS),
        "memory_mb": ("int", limits.SANDBOX_MIN_MEMORY_MB, limits.SANDBOX_MAX_MEMORY_MB),
    }
}

FEATURE = Feature(
    name="sandbox",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[RUN_SANDBOX_CODE_TOOL],
    scripted_rules=[rule_run],
)
