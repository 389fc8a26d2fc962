"""The scratchpad spaces (seeds 001 and 003) as the engine sees them: one `Feature`."""

from __future__ import annotations

from memory_app.scratchpad import prompts
from memory_app.scratchpad.context import SECTION
from memory_app.scratchpad.dashboard import DASHBOARD
from memory_app.scratchpad.scripted import scratchpad_note, scratchpad_plan, scratchpad_ref, scratchpad_show
from memory_app.scratchpad.settings import SETTINGS, SETTINGS_RULES
from memory_app.scratchpad.tools import SPEC
from memory_app.scratchpad.transfer import scratchpad_export, scratchpad_import
from sessions_app.engine.contract import Feature, FeatureLifecycle

FEATURE = Feature(
    name="scratchpad",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[SPEC],
    sections=[SECTION],
    scripted_rules=[scratchpad_plan, scratchpad_note, scratchpad_ref, scratchpad_show],
    context_openings=[prompts.HINT_OPENING, prompts.BLOCK_START],
    lifecycle=FeatureLifecycle(export=scratchpad_export, import_=scratchpad_import),
    dashboard=DASHBOARD,
)
