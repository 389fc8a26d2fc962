"""Offloaded observations (seed 004) as the engine sees them: one `Feature`."""

from __future__ import annotations

from memory_app.observations.dashboard import DASHBOARD
from memory_app.observations.hooks import OBSERVATION_HOOK
from memory_app.observations.scripted import rule_read_grep
from memory_app.observations.selectors import SCOPE_SESSION, SCOPE_TURN
from memory_app.observations.services import MASKED_RESULT_STORE
from memory_app.observations.tools import SCRATCHPAD_READ_TOOL
from memory_app.observations.transfer import observations_export, observations_ids, observations_import
from sessions_app.engine.contract import Feature, FeatureLifecycle

# Seed 004: results over 4,096 bytes of JSON are stored; observations live an hour; a turn reads
# only its own (`scope: turn`) unless the session widens that. `enabled` (ours, an addition that
# changes no default) switches the store off: no offloading, no `scratchpad_read`, and masked
# results are not kept (their placeholder says so).
SETTINGS = {"offload": {"enabled": True, "threshold_bytes": 4096, "ttl_seconds": 3600, "scope": SCOPE_TURN}}
SETTINGS_RULES = {
    "offload": {
        "enabled": ("bool",),
        "threshold_bytes": ("int", 64, 1 << 30),
        "ttl_seconds": ("int", 1, 365 * 24 * 3600),
        "scope": ("choice", {SCOPE_TURN, SCOPE_SESSION}),
    }
}

FEATURE = Feature(
    name="observations",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=[SCRATCHPAD_READ_TOOL],
    hooks=[OBSERVATION_HOOK],
    result_store=MASKED_RESULT_STORE,
    scripted_rules=[rule_read_grep],
    lifecycle=FeatureLifecycle(export=observations_export, ids=observations_ids, import_=observations_import),
    dashboard=DASHBOARD,
)
