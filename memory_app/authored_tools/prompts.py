"""Every text the model reads about authored tools, in one place: the descriptions and schemas
of `define_tool` and `remove_tool` (DESIGN.md, "Agent-authored tools"), and what a call of an
authored tool answers when it cannot return a value."""

from __future__ import annotations

from typing import Any

DEFINE_TOOL = "define_tool"
REMOVE_TOOL = "remove_tool"

DEFINE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": "The tool's name: lowercase letters, digits and underscores, starting with a letter",
        },
        "description": {"type": "string", "description": "What the tool does, as you will read it"},
        "input_schema": {
            "type": "object",
            "description": (
                'A JSON Schema with "type": "object" for the tool\'s input, using only type, properties, '
                "required, items, enum, minimum, maximum and description"
            ),
        },
        "code": {
            "type": "string",
            "description": (
                "Python 3 defining run(args, session) at its top level; what run returns (JSON) is the "
                "tool's result"
            ),
        },
    },
    "required": ["name", "description", "input_schema", "code"],
}
DEFINE_TOOL_DESCRIPTION = (
    "Define a tool of your own, or replace one you defined: it is offered to you, and to every session "
    "of this agent, from your next model call, under its name (which may not be one of your other "
    "tools'). Its code is Python 3 defining run(args, session): args is the call's input (already checked "
    "against input_schema), session.notepad reads and edits the session notepad (read(), write(content), "
    "append(text): each edit is saved at once, so a long operation can leave progress notes). It runs in "
    "the code sandbox with its limits (no network, no files kept, the session's sandbox timeout and "
    "memory). What run returns, as JSON, is the tool's result; an exception is a tool error with the "
    "traceback's last lines; what the code prints is not shown. Every definition is kept as a version. "
    'Returns {"ok": true, "version"}.'
)
REMOVE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The name of a tool you defined"}},
    "required": ["name"],
}
REMOVE_TOOL_DESCRIPTION = (
    "Remove a tool you defined with define_tool: it is no longer offered from your next model call (its "
    'versions are kept). Returns {"ok": true}.'
)

NO_AGENT = (
    "Authored tools belong to an agent, and this session has none: define_tool and remove_tool are not "
    "available here."
)
NOT_OFFERED = (
    "Defining tools is not available in this session: it needs the code sandbox (settings "
    "sandbox.enabled, and a server where it runs) and knowledge.tool_authoring."
)
DEFINED_NOTE = (
    "Defined. The tool is offered to you from your next model call, and to every session of this agent."
)
REMOVED_NOTE = "Removed. It is no longer offered from your next model call."

# A call of an authored tool that returned no value: what the model reads (each a tool error).
CALL_EXCEPTION = "The tool {name} raised an exception (its traceback's last lines):\n{trace}"
CALL_MEMORY = (
    "The tool {name} ran out of memory: the session's sandbox allows {memory_mb} MB "
    "(sandbox.memory_mb). Its traceback's last lines:\n{trace}"
)
CALL_TIMEOUT = (
    "The tool {name} did not finish within {seconds} seconds (the session's sandbox.timeout_seconds), "
    "so it was stopped. Notepad edits it made before are kept."
)
CALL_NOT_JSON = "The tool {name} returned a value that is not JSON ({error}). Return dicts, lists, strings, numbers, booleans or None."
CALL_TOO_LARGE = (
    "The tool {name} returned {size} bytes of JSON, over the limit of {limit} bytes "
    "(SANDBOX_CALL_RESULT_MAX_BYTES). Return less, or write it to the notepad in parts."
)
CALL_NO_RUN = "The tool {name} defines no function run(args, session) at its top level."
CALL_NO_RESULT = (
    "The tool {name} ended without returning a result (exit status {exit_code}: {why}). "
    "Its last output:\n{stderr}"
)
CALL_SANDBOX_OFF = "The tool {name} cannot run: the code sandbox is not available ({error})."
CALL_SANDBOX_FAILED = "The tool {name} could not be started in the sandbox: {error}. Nothing was run."
