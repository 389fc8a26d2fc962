"""What operators see of the notepad (`FEATURE.dashboard`): its tab of the session page
(`panels`) and its views (`views`, `urls`), its row of the context gauge, and its fields on the
session's admin page."""

from __future__ import annotations

from memory_app.notepad.context import NOTEPAD_SECTION
from memory_app.notepad.dashboard.panels import NOTEPAD_UPDATED, PANEL
from sessions_app.engine.contract import FeatureDashboard, GaugeRow

DASHBOARD = FeatureDashboard(
    panels=[PANEL],
    urls="memory_app.notepad.dashboard.urls",
    gauge_rows=[GaugeRow(section=NOTEPAD_SECTION.name, label="Notepad", events=frozenset({NOTEPAD_UPDATED}))],
    admin_fields="memory_app.notepad.admin.SessionNotepadFields",
)
