"""`recall` as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.recall.scripted import rule_recall
from memory_app.recall.tools import RECALL
from sessions_app.engine.contract import Feature

FEATURE = Feature(name="recall", tools=[RECALL], scripted_rules=[rule_recall])
