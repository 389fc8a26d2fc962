"""What operators see of offloaded observations (`FEATURE.dashboard`): their tab of the session
page (`panels`) and its views (`views`, `urls`)."""

from __future__ import annotations

from memory_app.observations.dashboard.panels import PANEL
from sessions_app.engine.contract import FeatureDashboard

DASHBOARD = FeatureDashboard(panels=[PANEL], urls="memory_app.observations.dashboard.urls")
