"""The session notepad (seed 000) as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.notepad.context import NOTEPAD_SECTION
from memory_app.notepad.dashboard import DASHBOARD
from memory_app.notepad.prompts import NOTEPAD_CHANGED_LEAD, NOTEPAD_HEADING
from memory_app.notepad.sandbox_api import SANDBOX_NAME, sandbox_notepad
from memory_app.notepad.scripted import rule_forget, rule_notepad, rule_remember
from memory_app.notepad.settings import SETTINGS, SETTINGS_RULES
from memory_app.notepad.tools import READ_NOTEPAD, UPDATE_NOTEPAD, WRITE_NOTEPAD
from memory_app.notepad.transfer import notepad_export, notepad_import
from sessions_app.engine.contract import Feature, FeatureLifecycle

FEATURE = Feature(
    name="notepad",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[READ_NOTEPAD, WRITE_NOTEPAD, UPDATE_NOTEPAD],
    sections=[NOTEPAD_SECTION],
    sandbox={SANDBOX_NAME: sandbox_notepad},
    scripted_rules=[rule_remember, rule_forget, rule_notepad],
    context_openings=[NOTEPAD_HEADING + "\n", NOTEPAD_CHANGED_LEAD],
    lifecycle=FeatureLifecycle(export=notepad_export, import_=notepad_import),
    dashboard=DASHBOARD,
)
