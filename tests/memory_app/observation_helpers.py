"""Shared helpers of the observation tests (plain functions, so no conftest is shared with the
other memory features' tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async

from memory_app.observations.models import Observation

NOTE = "Large observation saved in scratchpad. To read it in full or partially, use the scratchpad_read tool."


def use_fs_root(settings: Any, tmp_path: Path) -> Path:
    """A shared folder for fs_read, switched on for the test."""
    root = tmp_path / "shared"
    root.mkdir(exist_ok=True)
    settings.PALIMPSEST_FS_ROOT = str(root)
    return root


def big_log(events: int = 2000) -> str:
    """The seed's example file: INFO lines, then one ERROR line at the very end."""
    lines = [f"INFO 2026-04-26 10:{i // 60 % 60:02d}:{i % 60:02d} event number {i}\n" for i in range(events)]
    return "".join(lines) + "ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT\n"


def seed_summary(content: str) -> str:
    """Seed 004: first 500 characters, the exact number omitted, last 500."""
    return content[:500] + f"\n[... {len(content) - 1000} characters omitted ...]\n" + content[-500:]


def tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of the last message of a request: what the model was given."""
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def tool_result(body: dict) -> dict:
    (block,) = tool_results(body)
    return block


def tool_result_json(body: dict) -> Any:
    return json.loads(tool_result(body)["content"])


def tool_names(body: dict) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


async def turn(client: Any, content: str = "go", timeout: float = 20) -> list[dict]:
    """Send a user message; the frames up to turn.completed."""
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed", timeout=timeout)


def events(frames: list[dict], kind: str) -> list[dict]:
    return [f for f in frames if f["type"] == kind]


@sync_to_async
def observations(**filters: Any) -> list[Observation]:
    return list(Observation.objects.filter(**filters).order_by("created_at"))


def latest_observation_id(body: dict) -> str:
    """The scratchpad_id of the latest synthetic observation anywhere in a request."""
    found = None
    for message in body["messages"]:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                try:
                    value = json.loads(block["content"])
                except ValueError:
                    continue
                if isinstance(value, dict) and value.get("_note") == NOTE:
                    found = value["scratchpad_id"]
    assert found is not None, "no synthetic observation in the request"
    return found
