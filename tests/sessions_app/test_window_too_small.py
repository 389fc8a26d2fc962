"""The refusal of a message that cannot fit the window says what takes the room and what to
change (issue 30 item 9a)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sessions_app.engine.compaction import budget

pytestmark = pytest.mark.django_db(transaction=True)


async def refusal(client: Any) -> dict:
    """The error that refuses the message: at once (a message too large for any history) or as
    the turn's first call is fitted (the fixed parts alone do not fit)."""
    await client.send({"type": "user.message", "content": "hello"})
    frame = await client.recv()
    if frame["type"] == "error":
        return frame
    frames = await client.until("turn.completed", timeout=10)
    (error,) = [f for f in frames if f["type"] == "error"]
    assert frames[-1]["stop_reason"] == "error"
    return error


async def test_a_window_below_the_fixed_prompt_names_every_part_and_the_room_for_the_answer(
    connect: Any,
) -> None:
    client = await connect()
    await client.create(context_window=2000, compact_threshold=0.5)
    reply = await refusal(client)
    assert (reply["type"], reply["code"]) == ("error", "context_window_too_small")
    message = reply["message"]
    for part in ("the tools", "the system prompt", "memory", "the history left"):
        assert part in message, message
    assert f"keep {budget.MIN_OUTPUT_TOKENS} tokens for the answer" in message
    assert "a margin for the token estimate's error" in message
    needed = int(re.search(r"at least about ([\d,]+)", message)[1].replace(",", ""))  # type: ignore[index]
    assert needed > 2000
    assert "fewer tools" in message and "shorter message" in message


async def test_the_window_it_names_is_enough(connect: Any) -> None:
    client = await connect()
    await client.create(context_window=2000)
    message = (await refusal(client))["message"]
    needed = int(re.search(r"at least about ([\d,]+)", message)[1].replace(",", ""))  # type: ignore[index]
    client = await connect()
    await client.create(context_window=needed + 100)
    await client.send({"type": "user.message", "content": "hello"})
    frames = await client.until("turn.completed", timeout=10)
    assert frames[-1]["stop_reason"] == "end_turn", frames


async def test_a_message_too_large_for_any_history_is_refused_at_once_naming_itself(connect: Any) -> None:
    client = await connect()
    await client.create(context_window=8000)
    await client.send({"type": "user.message", "content": "palimpsest " * 4000, "request_id": 3})
    reply = await client.recv()
    assert (reply["type"], reply["code"], reply["request_id"]) == ("error", "context_window_too_small", 3)
    assert "the message itself" in reply["message"]
    assert f"keep {budget.MIN_OUTPUT_TOKENS} tokens for the answer" in reply["message"]
