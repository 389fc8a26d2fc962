"""A feature used by the engine benchmark: `bench_noop`, a server tool that does nothing."""

from __future__ import annotations

from typing import Any

from sessions_app.engine.contract import Feature, ToolContext, ToolSpec


async def _noop(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    return {"ok": True}


NOOP_FEATURE = Feature(
    name="bench_noop",
    tools=[ToolSpec(name="bench_noop", description="No-op.", input_schema={"type": "object"}, handler=_noop)],
)
