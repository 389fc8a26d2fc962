"""The scripted model learns `recall`: `recall: QUERY` calls the tool; after its result, the
answer is the top hit's passage (so tests and benchmarks can check what was found)."""

from __future__ import annotations

import json
import re

from memory_app.recall import prompts
from sessions_app.common.content import content_text
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_RECALL_RE = re.compile(r"^recall:\s*(.+)$", re.DOTALL | re.IGNORECASE)

NOTHING_FOUND = "I found nothing about that in my earlier sessions."
NOT_OFFERED_REPLY = "I cannot search here: recall needs an agent, or, in a session without one, an archive."


@scripted_rule(
    help_line="recall: QUERY: I search my earlier sessions and archives and say the best passage (recall)"
)
def rule_recall(inp: ScriptedInput) -> ScriptedReply | None:
    results = inp.tool_results or []
    if len(results) == 1 and results[0].get("name") == prompts.TOOL_NAME:
        return _answer(results[0])
    match = _RECALL_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if prompts.TOOL_NAME not in inp.tool_names:
        return ScriptedReply(text=NOT_OFFERED_REPLY)
    return ScriptedReply(
        text="Searching my earlier sessions.",
        tool_uses=[(prompts.TOOL_NAME, {"query": match.group(1).strip()})],
    )


def _answer(result: dict) -> ScriptedReply:
    text = content_text(result.get("content"))
    if result.get("is_error"):
        return ScriptedReply(text=f"The search failed: {text}")
    try:
        hits = json.loads(text).get("results") or []
    except (ValueError, AttributeError):
        hits = []
    if not hits:
        return ScriptedReply(text=NOTHING_FOUND)
    return ScriptedReply(text=str(hits[0].get("text", "")))
