"""Scripted-model rules of sub-sessions: the offline model delegates, and a scripted child reports.

- `spawn TASK` / `fork TASK`: the model calls spawn_session / fork_session with that task; the
  built-in results rule then reports what the child returned.
- In a child (report_result is offered), the model answers its task as it would anywhere (the
  other rules) and sends that answer with report_result in the same step; when the answer needs
  tools first, it reports the tools' results once they are back.
"""

from __future__ import annotations

import re

from memory_app.subsessions import prompts
from memory_app.subsessions.selectors import FORK_SESSION, REPORT_RESULT, SPAWN_SESSION
from sessions_app.engine.features import ScriptedInput, ScriptedReply, features, scripted_rule
from sessions_app.engine.providers.scripted import scripted_answer

_SPAWN_RE = re.compile(r"^spawn\s+(.+)$", re.DOTALL | re.IGNORECASE)
_FORK_RE = re.compile(r"^fork\s+(.+)$", re.DOTALL | re.IGNORECASE)


def _delegate(inp: ScriptedInput, pattern: re.Pattern[str], tool: str, text: str) -> ScriptedReply | None:
    match = pattern.match((inp.user_text or "").strip())
    if not match:
        return None
    if tool not in inp.tool_names:
        return ScriptedReply(text=prompts.SCRIPTED_CANNOT_DELEGATE)
    return ScriptedReply(text=text, tool_uses=[(tool, {"task": match.group(1).strip()})])


@scripted_rule("spawn TASK: I delegate TASK to a new sub-session (spawn_session) and report its result")
def rule_spawn(inp: ScriptedInput) -> ScriptedReply | None:
    return _delegate(inp, _SPAWN_RE, SPAWN_SESSION, prompts.SCRIPTED_DELEGATING)


@scripted_rule("fork TASK: I fork this session (fork_session) to do TASK and report its result")
def rule_fork(inp: ScriptedInput) -> ScriptedReply | None:
    return _delegate(inp, _FORK_RE, FORK_SESSION, prompts.SCRIPTED_FORKING)


@scripted_rule()
def rule_child_reports(inp: ScriptedInput) -> ScriptedReply | None:
    if REPORT_RESULT not in inp.tool_names:
        return None
    if inp.tool_results and any(r["name"] == REPORT_RESULT for r in inp.tool_results):
        return None
    # The answer the other rules give (they were tried before this one and did not match, so in
    # effect the built-in rules, with every rule's help line).
    others = [rule for rule in features().scripted_rules if rule is not rule_child_reports]
    answer = scripted_answer(inp.body, others, features().context_openings)
    if answer.tool_uses or not answer.text:
        return answer
    return ScriptedReply(text=answer.text, tool_uses=[(REPORT_RESULT, {"result": answer.text})])
