"""The agent's knowledge tools as the engine sees them: one `Feature`."""

from __future__ import annotations

from memory_app.knowledge.scripted import rule_learn, rule_skill, rule_state, rule_use_skill
from memory_app.knowledge.settings import SETTINGS, SETTINGS_RULES
from memory_app.knowledge.tools import TOOLS
from sessions_app.engine.contract import Feature

FEATURE = Feature(
    name="knowledge",
    settings=SETTINGS,
    settings_rules=SETTINGS_RULES,
    tools=TOOLS,
    scripted_rules=[rule_learn, rule_skill, rule_use_skill, rule_state],
)
