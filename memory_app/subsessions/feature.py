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

# Bounds of what a session may ask for: deep trees and wide fan-outs multiply model calls.
MAX_DEPTH_LIMIT = 8
MAX_CONCURRENT_LIMIT = 32

SETTINGS = {"subsessions": {"enabled": True, "max_depth": 2, "max_concurrent": 4, **TEXT_SETTINGS}}
SETTINGS_RULES = {
    "subsessions": {
        "enabled": ("bool",),
        "max_depth": ("int", 0, MAX_DEPTH_LIMIT),
        "max_concurrent": ("int", 1, MAX_CONCURRENT_LIMIT),
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
