"""U+0000 in what a model or a tool wrote (PostgreSQL refuses it in text and jsonb): stored with
U+FFFD in its place, the same everywhere, and the turn goes on."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import Message, ModelCall, SessionEvent
from tests.fake_anthropic import text, tool_use

MODEL = "claude-sonnet-4-6"


async def _turn_with_nul(connect: Any, fake: Any) -> list[dict]:
    # The model writes U+0000 in its text and in a tool's input; the tool echoes it back.
    fake.enqueue(
        tool_use("test_echo", {"text": "before\x00after"}, text="reading a\x00b"), text("saw \x00 in it")
    )
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "read nul.txt"})
    return await client.until("turn.completed")


def _stored_texts() -> str:
    parts = [str(m.content) for m in Message.objects.all()]
    parts += [str(e.payload) for e in SessionEvent.objects.all()]
    parts += [str(c.response) for c in ModelCall.objects.all()]
    return "".join(parts)


@pytest.mark.django_db(transaction=True)
async def test_nul_from_the_model_and_a_tool_is_stored_as_the_replacement_character(
    connect, fake_anthropic, echo_tool
):
    frames = await _turn_with_nul(connect, fake_anthropic)
    assert frames[-1]["stop_reason"] == "end_turn"
    stored = await sync_to_async(_stored_texts)()
    assert "\x00" not in stored and "saw \ufffd in it" in stored and "before\ufffdafter" in stored
    # The next request carries the same text: what was stored is what the model is shown.
    assert "before\ufffdafter" in str(fake_anthropic.requests[-1].body)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
async def test_nul_does_not_break_a_turn_on_postgresql(connect, fake_anthropic, echo_tool):
    frames = await _turn_with_nul(connect, fake_anthropic)
    assert [f["type"] for f in frames if f["type"] == "error"] == []
    assert frames[-1]["stop_reason"] == "end_turn"
