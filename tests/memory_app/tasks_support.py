"""Helpers for task-scoping tests through the strict fake Messages API."""

from __future__ import annotations

import json

from tests.conftest import chat, strict_fake

MODEL = "claude-sonnet-4-6"
__all__ = ["chat", "strict_fake"]  # shared with the tasks tests (tests/conftest.py)

NO_SCRATCHPAD = {"scratchpad": {"enabled": False}}
# Task scoping on, the notepad and the scratchpad off.
ONLY_TASKS = {"notepad": {"enabled": False}, "scratchpad": {"enabled": False}, "offload": {"enabled": False}}


def names_by_id(body: dict) -> dict[str, str]:
    return {
        b["id"]: b["name"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    }


def last_result(body: dict) -> tuple[str, dict | str] | None:
    """(tool name, parsed content) of the last message's last tool_result, if it ends with one."""
    results = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    if not results:
        return None
    block = results[-1]
    try:
        content = json.loads(block["content"])
    except (TypeError, ValueError):
        content = block["content"]
    return names_by_id(body).get(block["tool_use_id"], "?"), content


def last_user_text(body: dict) -> str:
    texts = [b.get("text", "") for b in body["messages"][-1]["content"] if b.get("type") == "text"]
    return texts[-1] if texts else ""


def tool_uses(body: dict) -> list[dict]:
    return [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]


def tool_results(body: dict) -> list[dict]:
    return [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


def request_text(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


def no_errors(frames: list[dict]) -> None:
    assert not [f for f in frames if f["type"] == "error"], [f for f in frames if f["type"] == "error"]
