"""The compaction recipe of docs/scripted-model.md and docs/compaction.md, as written: a session
with a small window and a few long messages to the scripted model compacts (issue 30 item 9b)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db(transaction=True)

# The recipe's numbers: keep them equal to the docs' (test_the_docs_give_these_numbers).
WINDOW, THRESHOLD, WORDS, MESSAGES = 8000, 0.5, 300, 5


def long_message(index: int) -> str:
    return f"message {index}: " + " ".join(f"word{n}" for n in range(WORDS))


async def test_the_recipe_shows_a_compaction(connect: Any) -> None:
    client = await connect()
    await client.create(context_window=WINDOW, compact_threshold=THRESHOLD)
    seen: list[str] = []
    for index in range(MESSAGES):
        await client.send({"type": "user.message", "content": long_message(index)})
        frames = await client.until("turn.completed", timeout=20)
        assert frames[-1]["stop_reason"] == "end_turn", frames
        seen += [f["type"] for f in frames]
        if "compaction.completed" in seen:
            break
    assert "compaction.completed" in seen
    # And the session goes on after it (a window below the fixed prompt got stuck here).
    for index in range(MESSAGES, MESSAGES + 3):
        await client.send({"type": "user.message", "content": long_message(index)})
        frames = await client.until("turn.completed", timeout=20)
        assert frames[-1]["stop_reason"] == "end_turn", frames


def test_the_docs_give_these_numbers() -> None:
    recipe = f'"context_window": {WINDOW}, "compact_threshold": {THRESHOLD}'
    for doc in ("docs/scripted-model.md", "docs/compaction.md"):
        text = (settings.BASE_DIR / doc).read_text()
        assert recipe in text, doc
        assert f"about {WORDS} words" in text, doc
