"""What operators see of the scratchpad (`FEATURE.dashboard`): its row of the context gauge and
its fields on the session's admin page."""

from __future__ import annotations

from memory_app.scratchpad.context import SECTION
from sessions_app.engine.contract import FeatureDashboard, GaugeRow

SCRATCHPAD_UPDATED = "scratchpad.updated"

DASHBOARD = FeatureDashboard(
    gauge_rows=[GaugeRow(section=SECTION.name, label="Scratchpad", events=frozenset({SCRATCHPAD_UPDATED}))],
    admin_fields="memory_app.scratchpad.admin.SessionScratchpadFields",
)
