"""The engine's own feature, always first in the feature list: its settings (the turn's step
budget, compaction's knobs, the session's spending budget), `session_archive_read` (seed 002),
and the scripted model's compaction rules."""

from __future__ import annotations

from sessions_app.budgets import BUDGET_DEFAULTS, BUDGET_RULES, BUDGET_SETTING
from sessions_app.engine.archive import SESSION_ARCHIVE_READ
from sessions_app.engine.compaction.scripted import answer_the_compaction_warning, summarize
from sessions_app.engine.compaction.summary import SUMMARY_CALL_SEPARATE, SUMMARY_CALL_SHARED
from sessions_app.engine.contract import Feature

MAX_STEPS_PER_TURN_LIMIT = 1_000

# The share of the compaction threshold that masking brings a request down to (1.0: just under
# the threshold, the smallest batch). Measured by `bench/bench_cost.py`.
MASK_LOW_WATER = 0.6


CORE_FEATURE = Feature(
    name="core",
    settings={
        "max_steps_per_turn": 25,
        # PROTOCOL.md v1.1: tool results older than the last `mask_keep_recent` are masked first;
        # a summary is at most `summary_max_tokens` long. A long turn's own older steps are
        # summarized when nothing else makes room; its newest `turn_keep_steps` stay verbatim.
        # Masking works in batches: once over the threshold, it masks down to `mask_low_water`
        # of it, so that it happens rarely and each time makes real room (every masking
        # rewrites the prompt cache from the first result it masks).
        "compaction": {
            "mask_keep_recent": 3,
            "mask_low_water": MASK_LOW_WATER,
            "summary_max_tokens": 2000,
            "summary_call": SUMMARY_CALL_SHARED,
            "turn_keep_steps": 2,
        },
        # PROTOCOL.md v1.2: limits on what the session's tree spends (`sessions_app.budgets`).
        BUDGET_SETTING: dict(BUDGET_DEFAULTS),
        # PROTOCOL.md v1.2: tool name (or prefix*) -> always_allow / always_ask (`common.approvals`).
        "approvals": {},
    },
    settings_rules={
        "max_steps_per_turn": ("int", 1, MAX_STEPS_PER_TURN_LIMIT),
        "compaction": {
            "mask_keep_recent": ("int", 0, 1000),
            "mask_low_water": ("number", 0.1, 1.0),
            "summary_max_tokens": ("int", 100, 32_000),
            "summary_call": ("choice", {SUMMARY_CALL_SHARED, SUMMARY_CALL_SEPARATE}),
            "turn_keep_steps": ("int", 1, 100),
        },
        BUDGET_SETTING: BUDGET_RULES,
        "approvals": ("policy_map",),
    },
    tools=[SESSION_ARCHIVE_READ],
    scripted_rules=[summarize, answer_the_compaction_warning],
)
