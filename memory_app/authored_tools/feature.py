"""Agent-authored tools as the engine sees them: one `Feature` with `define_tool`, `remove_tool`
and, as its `tool_source`, every enabled tool of the session's agent."""

from __future__ import annotations

from memory_app.authored_tools.scripted import rule_define_tool, rule_remove_tool
from memory_app.authored_tools.source import authored_tools
from memory_app.authored_tools.tools import TOOLS
from sessions_app.engine.contract import Feature

FEATURE = Feature(
    name="authored_tools",
    tools=TOOLS,
    tool_source=authored_tools,
    scripted_rules=[rule_define_tool, rule_remove_tool],
)
