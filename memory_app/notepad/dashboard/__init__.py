"""What operators see of the notepad (`FEATURE.dashboard`): its tab of the session page, its
history and its part of the archive stepper (`panels`), its views (`views`, `urls`), its row of
the context gauge, and its fields on the session's admin page."""

from __future__ import annotations

from memory_app.notepad.context import NOTEPAD_SECTION
from memory_app.notepad.dashboard.panels import ARCHIVE_SECTION, NOTEPAD_UPDATED, PANEL, notepad_history_url
from memory_app.notepad.dashboard.selectors import NOTEPAD
from sessions_app.engine.contract import FeatureDashboard, GaugeRow

DASHBOARD = FeatureDashboard(
    panels=[PANEL],
    urls="memory_app.notepad.dashboard.urls",
    histories={NOTEPAD: notepad_history_url},
    archive=[ARCHIVE_SECTION],
    gauge_rows=[GaugeRow(section=NOTEPAD_SECTION.name, label="Notepad", events=frozenset({NOTEPAD_UPDATED}))],
    admin_fields="memory_app.notepad.admin.SessionNotepadFields",
)
