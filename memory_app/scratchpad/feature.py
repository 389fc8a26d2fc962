"""The scratchpad spaces (seeds 001 and 003) as the engine sees them: one `Feature`."""

from __future__ import annotations

from memory_app.scratchpad import prompts
from memory_app.scratchpad.context import SECTION
from memory_app.scratchpad.scripted import scratchpad_note, scratchpad_plan, scratchpad_ref, scratchpad_show
from memory_app.scratchpad.tools import SPEC
from sessions_app.engine.features import Feature

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

FEATURE = Feature(
    name="scratchpad",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[SPEC],
    sections=[SECTION],
    scripted_rules=[scratchpad_plan, scratchpad_note, scratchpad_ref, scratchpad_show],
    context_openings=[prompts.HINT_OPENING, prompts.BLOCK_START],
)
