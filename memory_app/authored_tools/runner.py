"""One call of an authored tool: its code run in the code sandbox (`jail.sandbox_run` with
`call_args`), `run(args, session)` called, and what it returned made the tool's result.

Rules:
- The input was checked against the tool's `input_schema` before this runs (the engine's check,
  `common.tool_input`): a bad input never starts a process.
- The sandbox's limits hold, with the session's `sandbox.timeout_seconds` and `memory_mb`.
- `session.notepad` inside is the session's notepad, each edit its own revision and
  `notepad.updated` event, announced at once and naming the call (`tool_use_id`): a long
  operation's progress notes reach the dashboard under the call as they are written.
- The result is what `run` returned, carried back on a pipe of its own (never stdout, so nothing
  the code prints can pass for it): a string as it is, any other JSON value as its JSON text
  (never content blocks). What the code prints is dropped; an error quotes the end of stderr.
- An exception, a value that is not JSON or is over `SANDBOX_CALL_RESULT_MAX_BYTES`, a timeout,
  the memory limit, a process that died: a tool error saying which (the traceback's last lines
  for an exception).
"""

from __future__ import annotations

import json
from typing import Any

from memory_app.authored_tools import prompts
from memory_app.notepad.sandbox_api import notepad_of
from memory_app.sandbox import limits
from memory_app.sandbox.errors import SandboxError, SandboxUnavailable
from memory_app.sandbox.jail import SandboxResult, sandbox_run
from sessions_app.engine.contract import ToolContext, ToolError

# The lines of a traceback (or of stderr) an error quotes: its end, where the error is.
TRACE_LAST_LINES = 12
TRACE_MAX_CHARS = 2000


def last_lines(text: str, *, lines: int = TRACE_LAST_LINES, chars: int = TRACE_MAX_CHARS) -> str:
    """The end of `text`: its last `lines` lines, at most `chars` characters."""
    tail = "\n".join(text.rstrip().splitlines()[-lines:])
    return tail[-chars:]


async def authored_tool_call(ctx: ToolContext, *, name: str, code: str, args: dict[str, Any]) -> str:
    """Run the authored tool `name` (`code`) on `args`; its result as text, or `ToolError`."""
    notepad = notepad_of(ctx)
    memory_mb = int(ctx.session.setting("sandbox", "memory_mb"))
    timeout = int(ctx.session.setting("sandbox", "timeout_seconds"))
    try:
        result = await sandbox_run(
            code=code,
            timeout_seconds=timeout,
            memory_mb=memory_mb,
            # Not a burst: each progress note is announced as it is written.
            notepad=notepad.for_call(ctx.tool_use_id) if notepad is not None else None,
            call_args=args,
        )
    except SandboxUnavailable as exc:
        raise ToolError(prompts.CALL_SANDBOX_OFF.format(name=name, error=exc)) from exc
    except (SandboxError, ValueError) as exc:
        raise ToolError(prompts.CALL_SANDBOX_FAILED.format(name=name, error=exc)) from exc
    return call_result(name=name, result=result, timeout=timeout, memory_mb=memory_mb)


def call_result(*, name: str, result: SandboxResult, timeout: int, memory_mb: int) -> str:
    """The tool's result from a finished run, or `ToolError` saying why there is none."""
    if result.timed_out:
        raise ToolError(prompts.CALL_TIMEOUT.format(name=name, seconds=timeout))
    outcome = result.call_outcome
    if outcome is None:
        raise ToolError(
            prompts.CALL_NO_RESULT.format(
                name=name,
                exit_code=result.exit_code,
                why=_why(result.exit_code, memory_mb),
                stderr=last_lines(result.stderr) or "(none)",
            )
        )
    if outcome["ok"]:
        value = outcome["value"]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    kind, error = outcome.get("kind"), str(outcome.get("error", ""))
    if kind == "memory":
        raise ToolError(prompts.CALL_MEMORY.format(name=name, memory_mb=memory_mb, trace=last_lines(error)))
    if kind == "not_json":
        raise ToolError(prompts.CALL_NOT_JSON.format(name=name, error=error))
    if kind == "too_large":
        raise ToolError(
            prompts.CALL_TOO_LARGE.format(name=name, size=error, limit=limits.SANDBOX_CALL_RESULT_MAX_BYTES)
        )
    if kind == "no_run":
        raise ToolError(prompts.CALL_NO_RUN.format(name=name))
    raise ToolError(prompts.CALL_EXCEPTION.format(name=name, trace=last_lines(error)))


def _why(exit_code: int, memory_mb: int) -> str:
    """What an exit status without a result says, in words."""
    signal_exit = 128
    cpu_signal, kill_signal, segv_signal = 24, 9, 11
    if exit_code == signal_exit + cpu_signal:
        return "its CPU time ran out (the session's sandbox.timeout_seconds)"
    if exit_code in (signal_exit + kill_signal, -kill_signal):
        return f"it was killed, most likely for memory (the session's sandbox.memory_mb, {memory_mb} MB)"
    if exit_code == signal_exit + segv_signal:
        return "it crashed (a segmentation fault)"
    return "it exited before run returned"
