"""Scripted-model rules of task scoping: `task NAME: WORK` scopes a task. The offline model calls
begin_task, does the task's inner work (notes WORK in the notepad with update_notepad when the
notepad is on), then ends the task with a summary; after end_task it says what was collapsed."""

from __future__ import annotations

import json
import re

from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_TASK_RE = re.compile(r"^task\s+([^:]{1,200}):\s*(.+)$", re.DOTALL | re.IGNORECASE)
TASKS_OFF_REPLY = "I cannot scope tasks in this session (task scoping is switched off)."


def _open_task(inp: ScriptedInput) -> dict | None:
    """The input of the request's last begin_task, if no end_task follows it."""
    found: dict | None = None
    for message in inp.body.get("messages", []):
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_use" and block.get("name") == "begin_task":
                found = dict(block.get("input") or {})
            elif block.get("type") == "tool_use" and block.get("name") == "end_task":
                found = None
    return found


@scripted_rule("task NAME: WORK: I scope a task (begin_task), do WORK inside it, then end it (end_task)")
def rule_task(inp: ScriptedInput) -> ScriptedReply | None:
    match = _TASK_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if "begin_task" not in inp.tool_names:
        return ScriptedReply(text=TASKS_OFF_REPLY)
    name, work = match.group(1).strip(), match.group(2).strip()
    return ScriptedReply(
        text=f"Scoping this as task {name}.", tool_uses=[("begin_task", {"name": name, "goal": work})]
    )


@scripted_rule()
def rule_task_steps(inp: ScriptedInput) -> ScriptedReply | None:
    """The task's next step after a tool result: the inner work, then end_task, then a report."""
    results = inp.tool_results or []
    if len(results) != 1 or results[0]["is_error"]:
        return None
    result = results[0]
    if result["name"] == "end_task":
        collapsed = json.loads(result["content"]).get("collapsed_messages", 0)
        return ScriptedReply(text=f"Task done; {collapsed} messages of it are collapsed.")
    task = _open_task(inp)
    if task is None or "end_task" not in inp.tool_names:
        return None
    name, work = str(task.get("name", "")), str(task.get("goal", ""))
    if result["name"] == "begin_task" and "update_notepad" in inp.tool_names:
        return ScriptedReply(
            text="Noting the finding.",
            tool_uses=[("update_notepad", {"operation": "append", "content": f"- {name}: {work}\n"})],
        )
    if result["name"] in ("begin_task", "update_notepad"):
        return ScriptedReply(
            text="Ending the task.", tool_uses=[("end_task", {"summary": f"{name}: {work} (done)"})]
        )
    return None
