"""What operators see of the notepad (`FEATURE.dashboard`): its row of the context gauge and its
fields on the session's admin page."""

from __future__ import annotations

from memory_app.notepad.context import NOTEPAD_SECTION
from sessions_app.engine.contract import FeatureDashboard, GaugeRow

NOTEPAD_UPDATED = "notepad.updated"

DASHBOARD = FeatureDashboard(
    gauge_rows=[GaugeRow(section=NOTEPAD_SECTION.name, label="Notepad", events=frozenset({NOTEPAD_UPDATED}))],
    admin_fields="memory_app.notepad.admin.SessionNotepadFields",
)
