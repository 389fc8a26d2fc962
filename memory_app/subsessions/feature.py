"""Sub-sessions (seed 000: `spawn_session`, `fork_session`, `report_result`) as the engine sees
them: one `Feature`. A child's place in its tree lives on the session itself
(`AgentSession.parent_session`, `root_session`, `depth`, `spawn_mode`, `spawned_by_tool_use_id`),
so this package has no models of its own."""

from __future__ import annotations

from memory_app.subsessions.context import CHILD_SECTION
from memory_app.subsessions.dashboard import DASHBOARD
from memory_app.subsessions.scripted import rule_child_reports, rule_fork, rule_spawn
from memory_app.subsessions.tools import (
    FORK_SESSION_TOOL,
    REPORT_RESULT_TOOL,
    SPAWN_SESSION_TOOL,
    TEXT_SETTINGS,
    TEXT_SETTINGS_RULES,
)
from sessions_app.engine.contract import Feature

# Bounds of what a session may ask for: deep trees and wide fan-outs multiply model calls. The
# fan-out bounds (`max_per_step`, `max_per_tree`, `max_per_client`) are also clamped to the
# service's ceilings, `PALIMPSEST_SUBSESSIONS_MAX_PER_*` (`services.subsession_bound`).
MAX_DEPTH_LIMIT = 8
MAX_CONCURRENT_LIMIT = 32
# The most a session may ask a fork to copy; the service's own ceiling, PALIMPSEST_FORK_MAX_TOKENS,
# applies on top (`services.fork_max_tokens`).
FORK_MAX_TOKENS_LIMIT = 10_000_000
MAX_PER_STEP_LIMIT = 64
MAX_PER_TREE_LIMIT = 10_000
MAX_PER_CLIENT_LIMIT = 10_000

SETTINGS = {
    "subsessions": {
        "enabled": True,
        "max_depth": 2,
        "max_concurrent": 4,
        # Every fork stores a copy of this much history and sends it in its first request: a
        # standard 200,000-token window's history fits, a huge window's does not.
        "fork_max_tokens": 200_000,
        "max_per_step": 8,
        "max_per_tree": 50,
        "max_per_client": 100,
        **TEXT_SETTINGS,
    }
}
SETTINGS_RULES = {
    "subsessions": {
        "enabled": ("bool",),
        "max_depth": ("int", 0, MAX_DEPTH_LIMIT),
        "max_concurrent": ("int", 1, MAX_CONCURRENT_LIMIT),
        "fork_max_tokens": ("int", 1, FORK_MAX_TOKENS_LIMIT),
        "max_per_step": ("int", 1, MAX_PER_STEP_LIMIT),
        "max_per_tree": ("int", 1, MAX_PER_TREE_LIMIT),
        "max_per_client": ("int", 1, MAX_PER_CLIENT_LIMIT),
        **TEXT_SETTINGS_RULES,
    }
}

FEATURE = Feature(
    name="subsessions",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[SPAWN_SESSION_TOOL, FORK_SESSION_TOOL, REPORT_RESULT_TOOL],
    sections=[CHILD_SECTION],
    scripted_rules=[rule_spawn, rule_fork, rule_child_reports],
    dashboard=DASHBOARD,
)
