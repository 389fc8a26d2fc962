"""Helpers for the scratchpad tests: run turns against the fake Messages API and read what the
model received."""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async

from memory_app.scratchpad import prompts
from memory_app.scratchpad.selectors import ScratchpadView, scratchpad_get
from memory_app.scratchpad.services import ScratchpadLimits, scratchpad_apply
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.models import AgentSession
from tests.conftest import Client
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use

TOOL = prompts.TOOL_NAME


async def open_session(connect: Any, **fields: Any) -> tuple[Client, uuid.UUID]:
    client = await connect()
    session = await client.create(**fields)
    return client, uuid.UUID(session["id"])


async def run_turn(client: Client, content: str) -> list[dict]:
    """Send a user message; returns every frame up to `turn.completed`."""
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed")


def bodies(fake: FakeAnthropicServer) -> list[dict]:
    """What the model received, one body per Messages API call."""
    return [r.body for r in fake.requests if r.path.split("?")[0].rstrip("/") == "/v1/messages"]


def latest_user(body: dict) -> dict:
    return [m for m in body["messages"] if m["role"] == "user"][-1]


def texts(message: dict) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


def tool_results(body: dict) -> list[dict]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def system_text(body: dict) -> str:
    system = body.get("system") or []
    if isinstance(system, str):
        return system
    return "\n".join(b["text"] for b in system)


def tool_names(body: dict) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


def blocks_in(body: dict) -> list[str]:
    """Every scratchpad block anywhere in the request's messages."""
    return [t for m in body["messages"] for t in texts(m) if prompts.BLOCK_START in t]


async def call_tool(
    client: Client, fake: FakeAnthropicServer, tool_input: dict, *, say: str = "go"
) -> tuple[str, bool]:
    """One turn in which the model calls the scratchpad once; returns the tool result the model
    received (its text, is_error)."""
    before = len(bodies(fake))
    fake.enqueue(tool_use(TOOL, tool_input), text("ok"))
    await run_turn(client, say)
    (result,) = tool_results(bodies(fake)[before + 1])
    return result["content"], bool(result.get("is_error"))


async def seed(session_id: uuid.UUID, *calls: dict) -> None:
    """Apply agent actions directly (test setup, not what is under test)."""

    def apply() -> None:
        settings = AgentSession.objects.get(pk=session_id).settings
        for call in calls:
            scratchpad_apply(
                session_id=session_id,
                action=call["action"],
                args=call,
                author=AGENT_AUTHOR,
                limits=ScratchpadLimits.from_settings(settings),
            )

    await sync_to_async(apply)()


async def pad(session_id: uuid.UUID) -> ScratchpadView:
    return await sync_to_async(scratchpad_get)(session_id=session_id)
