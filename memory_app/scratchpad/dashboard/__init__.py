"""What operators see of the scratchpad (`FEATURE.dashboard`): its fields on the session's admin
page."""

from __future__ import annotations

from sessions_app.engine.contract import FeatureDashboard

DASHBOARD = FeatureDashboard(admin_fields="memory_app.scratchpad.admin.SessionScratchpadFields")
