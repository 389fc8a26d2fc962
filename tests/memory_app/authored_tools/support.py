"""Helpers of the authored tools' tests: sessions of an agent over the agent websocket, turns
that may wait for the sandbox, and what a turn's frames say."""

from __future__ import annotations

import json
from typing import Any

# Only a hang guard: a turn that runs code may wait longer than a frame's default 5 seconds.
TURN_GUARD_SECONDS = 90
AGENT = "helper"
COUNT_CODE = "def run(args, session):\n    return {'words': len(args['text'].split())}\n"
COUNT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def agent_create(client: Any, name: str = AGENT) -> None:
    await client.send({"type": "agent.create", "name": name})
    assert (await client.recv())["type"] == "agent.created"


async def turn(client: Any, content: str) -> list[dict]:
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed", timeout=TURN_GUARD_SECONDS)


def define_words(name: str, code: str, *, description: str = "", schema: dict | None = None) -> str:
    """The scripted model's `define tool` message."""
    described = f" ({description})" if description else ""
    given = f" {json.dumps(schema)}" if schema is not None else ""
    return f"define tool {name}{described}{given}:\n{code}"


def call_words(name: str, args: dict) -> str:
    return f"tool {name} {json.dumps(args)}"


def results(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "tool.result"]


def result(frames: list[dict]) -> dict:
    found = results(frames)
    assert len(found) == 1, frames
    return found[0]


def offered(session: dict) -> list[str]:
    return list(session["server_tools"])
