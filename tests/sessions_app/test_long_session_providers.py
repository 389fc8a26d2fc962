"""Issue 35's promise on each provider: a long session on `gpt-4.1` (OpenAI's Chat Completions)
and on `claude-sonnet-4-6` (Anthropic's Messages), each against its strict fake that refuses any
request over a small window, runs through many compactions, offloaded tool results and a child,
with every turn ending normally, no request over the window and nothing the fake rejects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.subsessions.prompts import CHILD_GUIDANCE
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING
from sessions_app.models import Archive, ModelCall
from tests.conftest import chat
from tests.fake_anthropic import Reply, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 12_000
BIG_LINES = 400  # ~28 KB: over the offload threshold (4,096 bytes)
REPORT = "The report: " + "all figures checked and nothing out of place. " * 40  # ~400 tokens


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if b.get("type") == "text"]


def model(body: dict) -> Reply:
    """The model, from its request alone: summarize when asked, answer the warning, a child
    reports, a read asks for the big file, a delegation spawns a child, anything else reports."""
    system = body.get("system")
    system_text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system or [])
    if not body.get("tools"):
        return text("Summary: the user asked for reads and reports; all were done.")
    last = body["messages"][-1]
    blocks = last.get("content") if isinstance(last.get("content"), list) else []
    if any(b.get("type") == "tool_result" for b in blocks):
        return text("Done with that. " + REPORT)
    words = " ".join(_texts(last))
    if PRE_COMPACTION_WARNING in words:
        return text("Notepad is up to date.")
    if CHILD_GUIDANCE in system_text:
        return tool_use("report_result", {"result": "the child counted 400 lines"})
    if "read the log" in words:
        return tool_use("fs_read", {"path": "big.log"})
    if "delegate" in words:
        return tool_use("spawn_session", {"task": "Count the lines of big.log."})
    return text(REPORT)


async def test_a_long_session_with_compactions_offloads_and_a_child_on_each_provider(
    connect: Any, model_servers: Any, settings: Any, tmp_path: Any
) -> None:
    (tmp_path / "big.log").write_text(
        "".join(f"line {n}: all quiet on shard {n % 7}\n" for n in range(BIG_LINES))
    )
    settings.PALIMPSEST_FS_ROOT = str(tmp_path)
    fake = model_servers(strict=True, window=WINDOW).fake
    fake.default_reply = model
    client = await connect()
    session = await client.create(model=model_servers.model, context_window=WINDOW, compact_threshold=0.6)
    stops, results = [], []
    for index in range(24):
        words = "please read the log" if index % 5 == 1 else "please delegate" if index == 12 else "report"
        frames = await chat(client, f"Request {index}: {words}. " + "Some context for it. " * 60)
        stops += [f["stop_reason"] for f in frames if f["type"] == "turn.completed"]
        results += [f for f in frames if f["type"] == "tool.result"]
    assert stops == ["end_turn"] * 24
    offloaded = [r for r in results if r["name"] == "fs_read" and "observation_id" in r]
    assert len(offloaded) == 5 and all(not r["is_error"] for r in results)
    spawned = [r for r in results if r["name"] == "spawn_session"]
    assert len(spawned) == 1 and json.loads(spawned[0]["content"])["status"] == "reported"
    archives = await sync_to_async(Archive.objects.filter(session_id=session["id"]).count)()
    assert archives >= 3
    calls = await sync_to_async(lambda: list(ModelCall.objects.values_list("provider", "error")))()
    assert {provider for provider, _ in calls} == {model_servers.provider}
    assert [error for _, error in calls if error] == []
    # The strict fake answers no request over the window or that its API would reject: each was
    # answered (a refused one has no usage).
    assert fake.requests and all(record.usage is not None for record in fake.requests)
