"""Task scoping (seed 000: `begin_task`, `end_task`) as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.tasks.context import TASKS_SECTION, tasks_warning_notes
from memory_app.tasks.dashboard import DASHBOARD
from memory_app.tasks.scripted import rule_task, rule_task_steps
from memory_app.tasks.selectors import tasks_history_view
from memory_app.tasks.tools import BEGIN_TASK, END_TASK, TEXT_SETTINGS, TEXT_SETTINGS_RULES
from memory_app.tasks.transfer import tasks_export, tasks_ids, tasks_import
from sessions_app.engine.contract import Feature, FeatureLifecycle

FEATURE = Feature(
    name="tasks",
    settings={"tasks": {"enabled": True, **TEXT_SETTINGS}},
    settings_rules={"tasks": {"enabled": ("bool",), **TEXT_SETTINGS_RULES}},
    tools=[BEGIN_TASK, END_TASK],
    sections=[TASKS_SECTION],
    scripted_rules=[rule_task, rule_task_steps],
    history_view=tasks_history_view,
    warning_notes=tasks_warning_notes,
    lifecycle=FeatureLifecycle(export=tasks_export, ids=tasks_ids, import_=tasks_import),
    dashboard=DASHBOARD,
)
