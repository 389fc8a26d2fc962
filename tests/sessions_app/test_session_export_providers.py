"""The export's round trip on each provider's fake API (Messages, Chat Completions): the request
the fake receives for the imported session's next turn is the one it receives for the
original's, once the imported session's own ids are read as the original's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine import transfer
from sessions_app.models import AgentSession, AgentToken, Archive
from tests.fake_anthropic import text, tool_use
from tests.sessions_app.transfer_support import BIG, FILLER, attach, chat, id_pairs, normalised

pytestmark = pytest.mark.django_db(transaction=True)


def _round_trip(session_id: uuid.UUID, owner_name: str) -> uuid.UUID:
    document = json.loads("".join(transfer.export_chunks(session_id)))
    owner = AgentToken.objects.get(name=owner_name)
    return transfer.session_import(document, owner=owner).pk


async def _next_body(connect: Any, token: str, session_id: Any, fake: Any) -> dict:
    client = await connect(token)
    await attach(client, session_id)
    await chat(client, "and next?", session_id)
    await client.close()
    return fake.requests[-1].body


async def test_the_next_request_on_each_provider_is_the_same(connect, make_token, model_servers, echo_tool):
    fake = model_servers(strict=True).fake
    fake.default_reply = text("Noted.")
    fake.enqueue(
        tool_use("write_notepad", {"content": "Q3 gap: EMEA rows 234-267"}),
        text("Written."),
        tool_use("session_scratchpad", {"action": "set_plan", "content": "1. check the rows"}),
        text("Planned."),
        tool_use("test_echo", {"text": BIG}),
        text("Echoed."),
    )
    token = await make_token("exporter")
    client = await connect(token)
    session = await client.create(model=model_servers.model, context_window=12_000, compact_threshold=0.4)
    for content in ("note it", "plan it", "echo it"):
        await chat(client, content, session["id"])
    for index in range(12):
        frames = await chat(client, f"request {index}: {FILLER}", session["id"])
        if any(f["type"] == "compaction.completed" for f in frames):
            break
    else:
        raise AssertionError("no compaction")
    await client.close()
    original = uuid.UUID(session["id"])
    importer = await make_token("importer")
    imported = await sync_to_async(_round_trip)(original, "importer")
    assert await sync_to_async(lambda: Archive.objects.filter(session_id=imported).exists())()
    pinned = await sync_to_async(
        lambda: AgentSession.objects.values_list("token_ratio", "last_prompt_tokens", "context_pins").get(
            pk=imported
        )
    )()
    assert (
        pinned
        == await sync_to_async(
            lambda: AgentSession.objects.values_list("token_ratio", "last_prompt_tokens", "context_pins").get(
                pk=original
            )
        )()
    )
    pairs = await sync_to_async(id_pairs)(original, imported)
    before = await _next_body(connect, token, original, fake)
    after = await _next_body(connect, importer, imported, fake)
    assert normalised(after, pairs) == normalised(before, {})
