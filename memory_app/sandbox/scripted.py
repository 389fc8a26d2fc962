"""The scripted model runs code: `run: PYTHON` calls run_sandbox_code with that source; the
built-in results rule then reports what it printed."""

from __future__ import annotations

import re

from memory_app.sandbox.tools import RUN_SANDBOX_CODE
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_RUN_RE = re.compile(r"^run:\s*(.+)$", re.DOTALL | re.IGNORECASE)
SANDBOX_OFF_REPLY = "I cannot run code here: the sandbox is off in this session or on this server."


@scripted_rule("run: PYTHON: I run PYTHON in the sandbox (run_sandbox_code)")
def rule_run(inp: ScriptedInput) -> ScriptedReply | None:
    match = _RUN_RE.match((inp.user_text or "").strip())
    if not match:
        return None
    if RUN_SANDBOX_CODE not in inp.tool_names:
        return ScriptedReply(text=SANDBOX_OFF_REPLY)
    return ScriptedReply(
        text="Running that in the sandbox.", tool_uses=[(RUN_SANDBOX_CODE, {"code": match.group(1)})]
    )
