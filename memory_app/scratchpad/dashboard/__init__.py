"""What operators see of the scratchpad (`FEATURE.dashboard`): its tab of the session page and
its spaces' histories (`panels`), its views (`views`, `urls`), its row of the context gauge, and
its fields on the session's admin page."""

from __future__ import annotations

from memory_app.scratchpad.context import SECTION
from memory_app.scratchpad.dashboard.panels import HISTORIES, PANEL, SCRATCHPAD_UPDATED
from sessions_app.engine.contract import FeatureDashboard, GaugeRow

DASHBOARD = FeatureDashboard(
    panels=[PANEL],
    urls="memory_app.scratchpad.dashboard.urls",
    histories=HISTORIES,
    gauge_rows=[GaugeRow(section=SECTION.name, label="Scratchpad", events=frozenset({SCRATCHPAD_UPDATED}))],
    admin_fields="memory_app.scratchpad.admin.SessionScratchpadFields",
)
