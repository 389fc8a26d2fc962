"""The engine's own feature, always first in the feature list: its settings (the turn's step
budget), `session_archive_read` (seed 002), and the scripted model's compaction rules."""

from __future__ import annotations

from sessions_app.engine.archive import SESSION_ARCHIVE_READ
from sessions_app.engine.compaction_scripted import answer_the_compaction_warning, summarize
from sessions_app.engine.features import Feature

MAX_STEPS_PER_TURN_LIMIT = 1_000

CORE_FEATURE = Feature(
    name="core",
    settings={"max_steps_per_turn": 25},
    settings_rules={"max_steps_per_turn": ("int", 1, MAX_STEPS_PER_TURN_LIMIT)},
    tools=[SESSION_ARCHIVE_READ],
    scripted_rules=[summarize, answer_the_compaction_warning],
)
