"""The notepad's changes in position `epoch` stay where they were first shown (issue 32), through
the real engine and the fake Messages API: with Anthropic's cache rules simulated, every request
reads from the cache all that the previous one sent up to its last breakpoint, however often the
notepad changes; a masking batch drops the copies a later one replaces from where it rewrites the
prefix anyway; the last notepad the model reads is always the current one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad.prompts import NOTEPAD_CHANGED_LEAD
from sessions_app import selectors
from sessions_app.models import AgentSession, ModelCall
from tests.conftest import chat
from tests.fake_anthropic import FakeAnthropicServer, Reply, text, tool_use
from tests.memory_app.test_notepad_epoch import last_notepad_read
from tests.sessions_app import test_compaction_live_work as live
from tests.sessions_app.conftest import NO_MEMORY

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("many_logs")]
# Twenty-four ~2.5 KB logs in the file tools' folder, as compaction's tests read them.
many_logs = live.many_logs
no_errors = live.no_errors
MODEL = "claude-sonnet-4-6"
NOTEPAD_ONLY = {**NO_MEMORY, "notepad": {"enabled": True, "position": "epoch"}, "offload": {"enabled": True}}


def results_in(body: dict) -> int:
    return sum(1 for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result")


def reads_and_notes(count: int, answer: str):
    """Read log 0, 1, ... and note each read in the notepad (every other step), then answer."""

    def model(body: dict) -> Reply:
        done = results_in(body)
        if done >= 2 * count:
            return text(answer)
        if done % 2:
            return tool_use("update_notepad", {"operation": "append", "content": f"- read log{done // 2}\n"})
        return tool_use("fs_read", {"path": f"log{done // 2}.txt"})

    return model


def copies(body: dict) -> list[str]:
    return [
        b["text"]
        for m in body["messages"]
        for b in m["content"]
        if b.get("type") == "text" and b["text"].startswith(NOTEPAD_CHANGED_LEAD)
    ]


@pytest.fixture
def cached(settings: Any) -> Any:
    with FakeAnthropicServer(strict=True, cache_rules="anthropic", window=200_000) as server:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.url
        yield server


async def test_each_request_reads_all_the_previous_one_cached_however_often_the_notepad_changes(
    connect: Any, cached: FakeAnthropicServer
) -> None:
    cached.default_reply = reads_and_notes(6, "read six")
    client = await connect()
    session = await client.create(model=MODEL, settings=NOTEPAD_ONLY)
    frames = await chat(client, "read six logs, noting each")
    no_errors(cached, frames)
    requests = cached.requests
    assert len(requests) == 13
    notepad = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    for previous, request in zip(requests[1:], requests[2:], strict=False):
        usage, before = request.usage, previous.usage
        assert usage is not None and before is not None
        # Nothing after the last breakpoint (no per-call block: the scratchpad is off), and the
        # whole of the previous request read back, its notepad copies included.
        assert usage["input_tokens"] == 0
        assert usage["cache_read_input_tokens"] == (
            before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
        )
    last = requests[-1].body
    assert last_notepad_read(last) == notepad.notepad
    assert len(copies(last)) == 6  # one per change, each where it was first shown
    # Each call's record names the messages holding a copy by position, and rebuilds exactly.
    calls = [call async for call in ModelCall.objects.filter(session_id=notepad.pk).order_by("started_at")]
    assert len(calls) == 13
    for call in calls:
        assert await sync_to_async(selectors.model_call_request_verified)(call=call)
    named = [item for item in calls[-1].request["messages"] if "$message" in item]
    assert len(named) >= 6


async def test_a_masking_batch_drops_the_replaced_copies_after_where_it_rewrites(
    connect: Any, strict_fake: Any
) -> None:
    fake = strict_fake(12_000)
    fake.default_reply = reads_and_notes(16, "read them all")
    client = await connect()
    session = await client.create(
        model=MODEL,
        context_window=12_000,
        compact_threshold=0.8,
        settings={**NOTEPAD_ONLY, "compaction": {"mask_low_water": 0.7}, "max_steps_per_turn": 40},
    )
    frames = await chat(client, "read sixteen logs, noting each")
    no_errors(fake, frames)
    assert frames[-1]["stop_reason"] == "end_turn"
    batches = [f for f in frames if f["type"] == "compaction.masked"]
    assert batches, "no masking batch"
    # Around the first batch: the copies after its first masked result but the last are gone.
    index = next(
        i for i, r in enumerate(fake.requests) if "masked to save context" in str(r.body["messages"])
    )
    before, after = fake.requests[index - 1].body, fake.requests[index].body
    assert len(copies(after)) < len(copies(before))
    notepad = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    assert last_notepad_read(fake.requests[-1].body) == notepad.notepad
    for request in fake.requests:
        assert copies(request.body) == sorted(set(copies(request.body)), key=copies(request.body).index)
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    positions = [a[0] for a in row.context_pins.get("anchors", [])]
    assert positions == sorted(positions)
