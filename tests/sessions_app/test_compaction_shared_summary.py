"""Compaction's summary call in the session's layout (`compaction.summary_call: "shared"`, the
default; issue 32): the session's tools, system prompt and history before the running turn as its
requests send them, then one user message asking for the summary, so that the prompt cache reads
all but that message. Against the fake Messages API simulating Anthropic's cache rules.

The separate call (seed 002's own system prompt, no tools) stays: chosen by the setting, and made
instead when the shared call's answer calls a tool or its prompt is refused as too long.
`test_compaction.py` covers the separate call itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.dashboard.selectors.prefix_break import prefix_break
from sessions_app.engine.compaction.scripted import summarize as scripted_summarize
from sessions_app.engine.compaction.summary import is_shared_summary_text, shared_instruction
from sessions_app.engine.contract import ScriptedInput
from sessions_app.engine.prompts import (
    COMPACTION_SHARED_MERGE_INSTRUCTION,
    COMPACTION_SUMMARY_MESSAGE,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
    PRE_COMPACTION_WARNING,
)
from sessions_app.models import ModelCall, ToolCall
from tests.fake_anthropic import FakeAnthropicServer, Reply, error, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
# About 900 tokens a message: a few turns cross the 3,000-token threshold. The memory features
# stay on (their per-call blocks must not reach the summary call).
FILLER = "palimpsest " * 300
SMALL = {"context_window": 10_000, "compact_threshold": 0.3}


@pytest.fixture
def cached_fake(settings: Any) -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(strict=True, cache_rules="anthropic") as server:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.url
        settings.PALIMPSEST_COMPACTION_RETRY_SECONDS = 0.01
        yield server


def shared_call(body: dict) -> bool:
    last = body["messages"][-1]["content"]
    return isinstance(last, list) and any(is_shared_summary_text(b.get("text", "")) for b in last)


def separate_call(body: dict) -> bool:
    return body.get("system") == COMPACTION_SUMMARY_SYSTEM_PROMPT


def stripped(value: Any) -> Any:
    """`value` without its cache_control markers (they are not part of the cached prefix)."""
    if isinstance(value, list):
        return [stripped(v) for v in value]
    if isinstance(value, dict):
        return {k: stripped(v) for k, v in value.items() if k != "cache_control"}
    return value


async def chat(client: Any, content: str) -> list[dict]:
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed")


async def until_compacted(client: Any) -> list[dict]:
    for index in range(10):
        frames = await chat(client, f"message {index}: {FILLER}")
        if any(f["type"] in ("compaction.completed", "compaction.failed") for f in frames):
            return frames
    raise AssertionError("no compaction")


def _text(message: dict) -> str:
    return " ".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


async def test_the_summary_call_is_the_sessions_cached_prefix_and_one_question(connect, cached_fake):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You help.", **SMALL)
    frames = await until_compacted(client)
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["summary"] == "ok"

    calls = cached_fake.requests
    index = next(i for i, r in enumerate(calls) if shared_call(r.body))
    assert not any(separate_call(r.body) for r in calls)
    summary, warned = calls[index], calls[index - 1]
    assert warned.body["messages"][-1]["content"][-1]["text"] == PRE_COMPACTION_WARNING
    # The same tools, system prompt and (no) tool_choice as the session's requests: a change to
    # any of them would make the provider write the prefix again.
    assert summary.body["tools"] == warned.body["tools"]
    assert stripped(summary.body["system"]) == stripped(warned.body["system"])
    assert "tool_choice" not in summary.body and "tool_choice" not in warned.body
    # The history before the running turn, as the warning step sent it; the turn and the warning
    # are left out.
    running = next(f for f in frames if f["type"] == "user.message")["content"]
    start = next(
        i for i, m in enumerate(warned.body["messages"]) if m["role"] == "user" and running in _text(m)
    )
    assert stripped(summary.body["messages"][:-1]) == stripped(warned.body["messages"][:start])
    assert all(running not in _text(m) for m in summary.body["messages"])
    # The question: one text block, no notepad or scratchpad block (those are the session's
    # per-call memory, after its last breakpoint).
    question = summary.body["messages"][-1]
    assert question["role"] == "user" and len(question["content"]) == 1
    assert COMPACTION_SUMMARY_SYSTEM_PROMPT in question["content"][0]["text"]
    # The warning step marked where the summarized history ends, so the summary call reads it all.
    before = warned.body["messages"][start - 1]["content"][-1]
    assert before.get("cache_control") == {"type": "ephemeral"}
    usage = summary.usage
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert usage["cache_read_input_tokens"] >= 0.9 * prompt
    assert usage["input_tokens"] < 0.1 * prompt

    # Recorded as a summary call whose record names the stored messages it sent, and which
    # resolves to exactly the body that was sent.
    call = await ModelCall.objects.filter(purpose="summary").aget()
    assert any("$messages" in item for item in call.request["messages"] if isinstance(item, dict))
    assert await sync_to_async(selectors.model_call_request_verified)(call=call)
    assert await sync_to_async(selectors.model_call_request)(call=call) == summary.body

    # The prompt inspector compares it with the warning step, and finds where it parts from it:
    # where the running turn began.
    summary_body = await sync_to_async(selectors.model_call_request)(call=call)
    found = await sync_to_async(prefix_break)(call=call, body=summary_body)
    warning_call = (
        await ModelCall.objects.filter(purpose="turn", started_at__lte=call.started_at)
        .order_by("-started_at", "-pk")
        .afirst()
    )
    assert found is not None and warning_call is not None
    assert (found.previous_id, found.where, found.index, found.block) == (
        warning_call.pk,
        "messages",
        start,
        0,
    )

    # The turn went on in the new epoch, which starts with the summary.
    after = calls[index + 1].body
    assert _text(after["messages"][0]).startswith(COMPACTION_SUMMARY_MESSAGE.split("{summary}")[0])


async def test_a_second_compaction_asks_to_merge_the_summary_the_epoch_starts_with(connect, cached_fake):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You help.", **SMALL)
    await until_compacted(client)
    await until_compacted(client)
    shared = [r.body for r in cached_fake.requests if shared_call(r.body)]
    assert len(shared) == 2
    assert COMPACTION_SHARED_MERGE_INSTRUCTION not in _text(shared[0]["messages"][-1])
    assert COMPACTION_SHARED_MERGE_INSTRUCTION in _text(shared[1]["messages"][-1])
    assert _text(shared[1]["messages"][0]).startswith(COMPACTION_SUMMARY_MESSAGE.split("{summary}")[0])


async def test_an_answer_that_calls_a_tool_is_not_run_and_the_separate_call_summarizes(connect, cached_fake):
    def answer(body: dict) -> Reply:
        if shared_call(body):
            return tool_use("update_notepad", {"operation": "append", "content": "x"}, id="toolu_summary_01")
        if separate_call(body):
            return text("the separate summary")
        return text("ok")

    cached_fake.default_reply = answer
    client = await connect()
    await client.create(model=MODEL, system_prompt="You help.", **SMALL)
    frames = await until_compacted(client)
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["summary"] == "the separate summary"
    kinds = [
        ("shared" if shared_call(r.body) else "separate")
        for r in cached_fake.requests
        if shared_call(r.body) or separate_call(r.body)
    ]
    assert kinds == ["shared", "separate"]
    assert not [f for f in frames if f["type"] == "tool.call"]
    assert not await ToolCall.objects.filter(tool_use_id="toolu_summary_01").aexists()
    assert await ModelCall.objects.filter(purpose="summary").acount() == 2


async def test_a_shared_call_refused_as_too_long_gives_way_to_the_separate_call(connect, cached_fake):
    def answer(body: dict) -> Reply | Any:
        if shared_call(body):
            return error(400, "invalid_request_error", "prompt is too long: 200001 tokens > 200000 maximum")
        if separate_call(body):
            return text("the separate summary")
        return text("ok")

    cached_fake.default_reply = answer
    client = await connect()
    await client.create(model=MODEL, system_prompt="You help.", **SMALL)
    frames = await until_compacted(client)
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["summary"] == "the separate summary"
    assert sum(1 for r in cached_fake.requests if shared_call(r.body)) == 1


async def test_summary_call_separate_is_seed_002s_own_call(connect, cached_fake):
    client = await connect()
    await client.create(
        model=MODEL, system_prompt="You help.", settings={"compaction": {"summary_call": "separate"}}, **SMALL
    )
    frames = await until_compacted(client)
    assert any(f["type"] == "compaction.completed" for f in frames)
    assert not any(shared_call(r.body) for r in cached_fake.requests)
    summary = next(r.body for r in cached_fake.requests if separate_call(r.body))
    assert "tools" not in summary


async def test_a_bad_summary_call_setting_is_refused(connect, cached_fake):
    client = await connect()
    await client.send({"type": "session.create", "settings": {"compaction": {"summary_call": "both"}}})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_settings")
    assert "summary_call" in reply["message"]


def test_the_scripted_model_summarizes_a_shared_call_from_its_messages():
    previous = COMPACTION_SUMMARY_MESSAGE.format(
        summary="User requests: the first task. Last assistant reply: done."
    )
    question = shared_instruction(400, merge=True)
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": previous}]},
            {"role": "assistant", "content": [{"type": "text", "text": "fine"}]},
            {"role": "user", "content": [{"type": "text", "text": "the second task"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "second done"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "[Session Scratchpad - not read]"},
                    {"type": "text", "text": question},
                ],
            },
        ]
    }
    reply = scripted_summarize(
        ScriptedInput(
            body=body,
            user_text=question,
            tool_results=None,
            tool_names=[],
            system_text="",
        )
    )
    assert reply is not None
    assert reply.text == "User requests: the first task; the second task. Last assistant reply: second done"


async def test_on_the_openai_provider_the_summary_call_reads_the_sessions_cached_prefix(connect, fake_openai):
    client = await connect()
    await client.create(model="openai/gpt-4.1", system_prompt="You help.", **SMALL)
    frames = await until_compacted(client)
    assert any(f["type"] == "compaction.completed" for f in frames)
    requests = fake_openai.requests
    index = next(i for i, r in enumerate(requests) if shared_call(r.body))
    summary, warned = requests[index].chat, requests[index - 1].chat
    # Chat Completions: the same tools and tool_choice, and the chat messages (system message
    # first) of the warning step up to the running turn.
    assert summary["tools"] == warned["tools"] and summary["tool_choice"] == warned["tool_choice"] == "auto"
    running = next(f for f in frames if f["type"] == "user.message")["content"]
    start = next(
        i for i, m in enumerate(warned["messages"]) if m["role"] == "user" and running in json.dumps(m)
    )
    assert summary["messages"][:-1] == warned["messages"][:start]
    assert summary["messages"][-1]["role"] == "user"
    # The server's prefix cache answered most of it.
    assert requests[index].cached_tokens >= 0.8 * requests[index].prompt_tokens
