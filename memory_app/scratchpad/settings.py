"""The scratchpad's session settings (`Feature.settings`), with their rules: the one place its
defaults are written."""

from __future__ import annotations

# Seed 003's limits; seed 001's nudges, each off (0) until a session turns it on.
SETTINGS = {
    "scratchpad": {
        "enabled": True,
        "notes_max_chars": 4000,
        "plan_max_chars": 2000,
        "refs_max_items": 50,
        "nudge_after_turns": 0,
        "nudge_on_plan_detected": 0,
        "nudge_after_compaction": 0,
        "nudge_turns_since_last_use": 0,
    }
}
SETTINGS_RULES = {
    "scratchpad": {
        "enabled": ("bool",),
        "notes_max_chars": ("int", 1, 1_000_000),
        "plan_max_chars": ("int", 1, 1_000_000),
        "refs_max_items": ("int", 1, 10_000),
        "nudge_after_turns": ("int", 0, 1_000_000),
        "nudge_on_plan_detected": ("int", 0, 1_000_000),
        "nudge_after_compaction": ("int", 0, 1_000_000),
        "nudge_turns_since_last_use": ("int", 0, 1_000_000),
    }
}
