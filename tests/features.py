"""Features used only by tests, added to `settings.PALIMPSEST_FEATURES` by fixtures (the same way
a real feature is wired: by naming it in the list)."""

from __future__ import annotations

from typing import Any

from sessions_app.engine.contract import Feature, ToolContext, ToolError, ToolSpec

# Contexts handed to `probe_sandbox` (tests read them, then clear the list).
PROBED: list[ToolContext] = []
# Inputs `test_counted`'s handler was given (tests read them, then clear the list).
COUNTED_CALLS: list[dict] = []


async def _echo(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    if tool_input.get("fail"):
        raise ToolError("test_echo cannot do that: fail was set")
    if tool_input.get("crash"):
        raise RuntimeError("boom")
    return {"echo": tool_input.get("text"), "step": ctx.step}


async def _probe(ctx: ToolContext, tool_input: dict) -> str:
    PROBED.append(ctx)
    return "probed"


ECHO_TOOL = ToolSpec(
    name="test_echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    handler=_echo,
)
ECHO_FEATURE = Feature(name="test_echo", tools=[ECHO_TOOL])
PROBE_FEATURE = Feature(
    name="test_probe",
    tools=[
        ToolSpec(
            name="probe_sandbox", description="test probe", input_schema={"type": "object"}, handler=_probe
        )
    ],
)


async def _counted(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    COUNTED_CALLS.append(tool_input)
    return {"n": tool_input["n"]}


# A tool whose handler records every input it is given: a call its schema refuses never reaches it.
COUNTED_FEATURE = Feature(
    name="test_counted",
    tools=[
        ToolSpec(
            name="test_counted",
            description="Count to n.",
            input_schema={
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1}},
                "required": ["n"],
            },
            handler=_counted,
        )
    ],
)


# Rooms `test_fill` was given (tests read them, then clear the list).
FILL_ROOMS: list[int | None] = []


async def _fill(ctx: ToolContext, tool_input: dict) -> str:
    """As much text as the call's room holds (a greedy reader)."""
    FILL_ROOMS.append(ctx.room_tokens)
    room = ctx.room_tokens or 0
    # "word " is a token of the local estimate.
    return "word " * max(room - 5, 0)


FILL_FEATURE = Feature(
    name="test_fill",
    tools=[
        ToolSpec(
            name="test_fill",
            description="Return as much text as fits.",
            input_schema={"type": "object", "properties": {}},
            handler=_fill,
        )
    ],
)
