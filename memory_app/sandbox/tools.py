"""`run_sandbox_code` (seed 000, DESIGN.md): Python run in the bubblewrap jail (`jail.sandbox_run`),
with the session notepad reachable inside through the bridge."""

from __future__ import annotations

import contextlib
from typing import Any

from memory_app.notepad.sandbox_api import notepad_of
from memory_app.sandbox import limits
from memory_app.sandbox.errors import SandboxError, SandboxUnavailable
from memory_app.sandbox.jail import sandbox_available, sandbox_run
from memory_app.sandbox.prompts import OUTPUT_TRUNCATED_NOTE, RUN_SANDBOX_CODE_DESCRIPTION
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec

RUN_SANDBOX_CODE = "run_sandbox_code"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "Python 3 source to run."},
        "timeout_seconds": {
            "type": "integer",
            "minimum": limits.SANDBOX_MIN_TIMEOUT_SECONDS,
            "description": "Wall-clock limit in seconds (at most the session's sandbox.timeout_seconds).",
        },
    },
    "required": ["code"],
}


def sandbox_enabled(session: SessionSnapshot) -> bool:
    """Offered where the server allows the sandbox (PALIMPSEST_SANDBOX) and the session's
    `sandbox.enabled` is on."""
    return bool(session.setting("sandbox", "enabled")) and sandbox_available()


async def run_sandbox_code(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    # "code" (a string) is required and "timeout_seconds" an integer of at least the minimum: both
    # checked against the schema before the handler runs. Blank code and the session's ceiling
    # are not the schema's to say.
    code: str = tool_input["code"]
    if not code.strip():
        raise ToolError('run_sandbox_code needs "code": the Python 3 source to run, as a non-empty string.')
    ceiling = int(ctx.session.setting("sandbox", "timeout_seconds"))
    timeout = tool_input.get("timeout_seconds")
    if timeout is None:
        timeout = ceiling
    if timeout > ceiling:
        raise ToolError(
            f"timeout_seconds must be an integer from {limits.SANDBOX_MIN_TIMEOUT_SECONDS} to {ceiling} "
            "(the session's sandbox.timeout_seconds). Nothing was run."
        )
    notepad = notepad_of(ctx)
    try:
        # One run's notepad edits are one revision and one `notepad.updated` event, announced
        # when the run ends (a timeout, a cancel and an error included); each edit is stored at
        # once, so the code's later reads see it.
        async with notepad.burst() if notepad is not None else contextlib.nullcontext() as run_notepad:
            result = await sandbox_run(
                code=code,
                timeout_seconds=timeout,
                memory_mb=int(ctx.session.setting("sandbox", "memory_mb")),
                notepad=run_notepad,
            )
    except ValueError as exc:
        raise ToolError(f"{exc}. Nothing was run.") from exc
    except SandboxUnavailable as exc:
        raise ToolError(f"The sandbox is not available on this server: {exc}") from exc
    except SandboxError as exc:
        raise ToolError(f"The sandbox could not start the code: {exc}. Nothing was run.") from exc
    stderr = result.stderr
    if result.output_truncated:
        stderr += OUTPUT_TRUNCATED_NOTE.format(limit=limits.SANDBOX_OUTPUT_MAX_BYTES)
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": stderr,
        "timed_out": result.timed_out,
        "duration_ms": result.duration_ms,
    }


RUN_SANDBOX_CODE_TOOL = ToolSpec(
    name=RUN_SANDBOX_CODE,
    description=RUN_SANDBOX_CODE_DESCRIPTION,
    input_schema=SCHEMA,
    handler=run_sandbox_code,
    enabled=sandbox_enabled,
    # A character is at least one byte: the jail's own check then counts the UTF-8 bytes.
    text_limits={"code": TextLimit(chars=limits.SANDBOX_MAX_CODE_BYTES, name="SANDBOX_MAX_CODE_BYTES")},
)
