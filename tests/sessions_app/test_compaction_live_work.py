"""Compaction keeps the live work (DESIGN.md): through the fake Messages API in strict mode (every
request must be one the real API accepts) with a context window it enforces."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.observations.models import Observation
from sessions_app.engine.prompts import (
    COMPACTION_PREVIOUS_SUMMARY_HEADING,
    COMPACTION_SHARED_MERGE_INSTRUCTION,
    COMPACTION_SUMMARY_MESSAGE,
    PRE_COMPACTION_WARNING,
)
from sessions_app.models import AgentSession, Archive, MaskedResult, Message
from tests.conftest import alist, chat
from tests.fake_anthropic import ErrorReply, FakeAnthropicServer, Reply, error, text, tool_use
from tests.sessions_app.conftest import NO_MEMORY, is_summary_call

# The bare engine with the observation store, which keeps masked results whole.
WITH_STORE = {**NO_MEMORY, "offload": {"enabled": True}}

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
# About 900 tokens a message.
FILLER = "palimpsest " * 300


def log_text(lines: int, tag: str) -> str:
    return "".join(
        f"{tag} {i:04d} INFO worker started job {i * 7919 % 10007} in 12 ms\n" for i in range(lines)
    )


def is_summary(body: dict) -> bool:
    return is_summary_call(body)


def last_block(body: dict) -> dict:
    content = body["messages"][-1]["content"]
    return content[-1] if isinstance(content, list) else {"type": "text", "text": content}


def user_text(body: dict) -> str:
    """The user's words of the last message (after any injected blocks)."""
    blocks = body["messages"][-1]["content"]
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    return texts[-1] if texts else ""


def no_errors(fake: FakeAnthropicServer, frames: list[dict]) -> None:
    assert not [f for f in frames if f["type"] == "error"], [
        (f["code"], f["message"]) for f in frames if f["type"] == "error"
    ]
    for record in fake.requests:
        assert record.prompt_tokens is not None
        assert record.prompt_tokens + record.body["max_tokens"] <= fake.window  # type: ignore[operator]


async def test_mid_turn_compaction_keeps_the_turns_message_and_newest_result_verbatim(
    connect, strict_fake, echo_tool
):
    fake = strict_fake(6000)
    big = log_text(40, "ERROR")  # ~2.5 KB: under the offload threshold, ~800 tokens

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return text("Earlier: three long messages about palimpsests.")
        block = last_block(body)
        if block.get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        if block.get("type") == "tool_result":
            return text("grep found 40 ERROR lines")
        if user_text(body) == "read big.log then grep ERROR":
            return tool_use("test_echo", {"text": big})
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, compact_threshold=0.5, context_window=6000, settings=NO_MEMORY)
    for index in range(2):
        await chat(client, f"message {index}: {FILLER}")
    frames = await chat(client, "read big.log then grep ERROR")

    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["trigger"] == "threshold" and completed["kept_messages"] == 3
    summary_at = max(i for i, r in enumerate(fake.requests) if is_summary(r.body))
    first_after = fake.requests[summary_at + 1].body["messages"]
    # The new epoch: the summary, then the running turn as it was, its newest result whole.
    assert first_after[0]["content"][0]["text"].endswith("Earlier: three long messages about palimpsests.")
    assert first_after[0]["content"][1]["text"] == "read big.log then grep ERROR"
    assert first_after[1]["content"][-1]["type"] == "tool_use"
    result = first_after[2]["content"][0]
    assert result["type"] == "tool_result" and json.loads(result["content"])["echo"] == big
    assert [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"] == (
        "grep found 40 ERROR lines"
    )
    assert frames[-1]["stop_reason"] == "end_turn"
    no_errors(fake, frames)


async def test_a_warning_answered_with_text_only_is_followed_by_a_call_that_answers_the_user(
    connect, strict_fake
):
    fake = strict_fake(4000)

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return text("S")
        if last_block(body).get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        return text(f"answer to {user_text(body)[:9]}")

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, compact_threshold=0.5, context_window=4000, settings=NO_MEMORY)
    for index in range(4):
        frames = await chat(client, f"message {index}: {FILLER}")
        if any(f["type"] == "compaction.warning" for f in frames):
            break
    types = [f["type"] for f in frames]
    replies = [f["content"][0]["text"] for f in frames if f["type"] == "assistant.message"]
    assert replies == ["Notepad is up to date.", f"answer to message {index}"]
    assert types.index("compaction.completed") < len(types) - 1 - types[::-1].index("assistant.message")
    assert frames[-1]["stop_reason"] == "end_turn"
    no_errors(fake, frames)


@pytest.fixture
def logs(settings: Any, tmp_path: Any) -> list[str]:
    """Eight ~2.5 KB logs in the file tools' folder (under the offload threshold, ~800 tokens each)."""
    settings.PALIMPSEST_FS_ROOT = str(tmp_path)
    texts = [log_text(40, f"R{n}") for n in range(8)]
    for n, content in enumerate(texts):
        (tmp_path / f"log{n}.txt").write_text(content)
    return texts


def reads_then(answer: str, count: int) -> Callable[[dict], Reply | ErrorReply]:
    def model(body: dict) -> Reply | ErrorReply:
        done = sum(1 for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result")
        return tool_use("fs_read", {"path": f"log{done}.txt"}) if done < count else text(answer)

    return model


async def test_eight_large_results_in_a_window_that_holds_three_never_exceed_it(connect, strict_fake, logs):
    fake = strict_fake(4000)
    fake.default_reply = reads_then("read all eight", 8)
    client = await connect()
    await client.create(model=MODEL, context_window=4000, settings=WITH_STORE)
    frames = await chat(client, "read the eight logs")
    no_errors(fake, frames)
    assert frames[-1]["stop_reason"] == "end_turn"
    last = fake.requests[-1].body
    contents = [
        b["content"] for m in last["messages"] for b in m["content"] if b.get("type") == "tool_result"
    ]
    # The newest result reaches the model whole; the oldest are placeholders naming observations.
    assert len(contents) == 8
    assert json.loads(contents[-1])["content"] == logs[-1]
    assert contents[0].startswith("[Tool result masked to save context:")
    masked = next(f for f in frames if f["type"] == "compaction.masked")["masked"]
    observation = await sync_to_async(Observation.objects.get)(pk=masked[0]["observation_id"])
    assert observation.session_scope and observation.char_count > 0
    assert masked[0]["observation_id"] in contents[0]
    # The stored messages are untouched: the history keeps every result whole.
    stored = await alist(
        Message.objects.filter(role="user").order_by("position").values_list("content", flat=True)
    )
    kept = [b["content"] for content in stored for b in content if b.get("type") == "tool_result"]
    assert [json.loads(k)["content"] for k in kept] == logs
    assert not any(f["type"] == "compaction.completed" for f in frames)  # no summary was needed


async def test_a_masked_result_is_readable_with_scratchpad_read_in_a_later_turn(connect, strict_fake, logs):
    fake = strict_fake(4000)
    reads = reads_then("done", 6)

    def model(body: dict) -> Reply | ErrorReply:
        if user_text(body).startswith("read back "):
            if last_block(body).get("type") == "tool_result":
                return text("read back done")
            return tool_use(
                "scratchpad_read", {"scratchpad_id": user_text(body)[10:], "mode": "head", "n": 60}
            )
        return reads(body)

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, context_window=4000, settings=WITH_STORE)
    frames = await chat(client, "read the logs")
    observation_id = next(f for f in frames if f["type"] == "compaction.masked")["masked"][0][
        "observation_id"
    ]
    frames = await chat(client, f"read back {observation_id}")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert not result["is_error"] and "R0 0000 INFO" in result["content"]
    no_errors(fake, frames)


async def test_a_summary_that_fails_twice_then_succeeds_compacts(connect, strict_fake):
    fake = strict_fake(4000)
    summary_calls = []

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            summary_calls.append(body)
            if len(summary_calls) <= 2:
                return error(400, "invalid_request_error", "summary refused for now")
            return text("third time lucky")
        if last_block(body).get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, compact_threshold=0.5, context_window=4000, settings=NO_MEMORY)
    for index in range(4):
        frames = await chat(client, f"message {index}: {FILLER}")
        if summary_calls:
            break
    assert len(summary_calls) == 3
    assert not any(f["type"] == "compaction.failed" for f in frames)
    assert next(f for f in frames if f["type"] == "compaction.completed")["summary"] == "third time lucky"
    assert frames[-1]["stop_reason"] == "end_turn"


async def test_a_summary_that_always_fails_with_no_room_ends_the_turn_and_leaves_the_session_as_it_was(
    connect, strict_fake
):
    fake = strict_fake(5000)

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            return error(400, "invalid_request_error", "summary refused")
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(model=MODEL, compact_threshold=0.5, context_window=5000, settings=NO_MEMORY)
    for index in range(2):
        await chat(client, f"message {index}: {FILLER}")
    before = await alist(Message.objects.order_by("position").values_list("position", "content"))
    frames = await chat(client, "long: " + "palimpsest " * 980)
    assert next(f for f in frames if f["type"] == "compaction.failed")["failures_in_a_row"] == 1
    err = next(f for f in frames if f["type"] == "error")
    assert err["code"] == "compaction_failed" and "summary refused" in err["message"]
    assert frames[-1]["stop_reason"] == "error"
    session = await sync_to_async(AgentSession.objects.get)()
    assert session.epoch == 0 and session.current_turn_id is None
    assert await sync_to_async(Archive.objects.count)() == 0
    after = await alist(Message.objects.order_by("position").values_list("position", "content"))
    assert after[: len(before)] == before  # nothing moved or vanished
    no_errors_in_requests = [r for r in fake.requests if not is_summary(r.body)]
    assert all(r.prompt_tokens + r.body["max_tokens"] <= 5000 for r in no_errors_in_requests)  # type: ignore[operator]


async def test_repeated_summary_failures_trip_a_breaker_until_a_new_turn(connect, strict_fake):
    fake = strict_fake(10_000)
    summary_calls = []

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            summary_calls.append(1)
            return error(400, "invalid_request_error", "summary refused")
        if last_block(body).get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(
        model=MODEL,
        compact_threshold=0.3,
        context_window=10_000,
        settings=NO_MEMORY,
        tools=[{"name": "client_lookup", "description": "Look up.", "input_schema": {"type": "object"}}],
    )
    for index in range(3):
        await chat(client, f"message {index}: {FILLER}")

    def looping(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            summary_calls.append(1)
            return error(400, "invalid_request_error", "summary refused")
        if last_block(body).get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        lookups = sum(
            1
            for m in body["messages"]
            for b in m["content"]
            if b.get("type") == "tool_use" and m["role"] == "assistant"
        )
        return tool_use("client_lookup", {"q": "x"}) if lookups < 6 else text("done")

    fake.default_reply = looping
    await client.send({"type": "user.message", "content": f"message 3: {FILLER}"})
    failed = []
    while True:
        frame = await client.recv(timeout=30)
        if frame["type"] == "compaction.failed":
            failed.append(frame)
        if frame["type"] == "tool.call":
            await client.send(
                {"type": "tool.result", "tool_use_id": frame["tool_use_id"], "content": "found"}
            )
        if frame["type"] == "turn.completed":
            break
    # Three failed compactions (three attempts each), then no more summary calls in this turn.
    assert [f["failures_in_a_row"] for f in failed] == [1, 2, 3]
    assert len(summary_calls) == 9
    assert frame["stop_reason"] == "end_turn"
    # A new turn resets the breaker: it tries again.
    fake.default_reply = model
    await chat(client, "again")
    assert len(summary_calls) > 9


@pytest.mark.parametrize("summary_call", ["separate", "shared"])
async def test_three_chained_compactions_merge_their_summaries_without_nesting(
    connect, strict_fake, summary_call
):
    fake = strict_fake(4000)
    summaries: list[dict] = []

    def model(body: dict) -> Reply | ErrorReply:
        if is_summary(body):
            summaries.append(body)
            return text(f"S{len(summaries)}")
        if last_block(body).get("text") == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        return text("ok")

    fake.default_reply = model
    client = await connect()
    await client.create(
        model=MODEL,
        compact_threshold=0.5,
        context_window=4000,
        settings={**NO_MEMORY, "compaction": {"summary_call": summary_call}},
    )
    index = 0
    while len(summaries) < 3 and index < 20:
        await chat(client, f"message {index}: {FILLER}")
        index += 1
    assert len(summaries) == 3
    if summary_call == "separate":
        requests = [body["messages"][0]["content"][0]["text"] for body in summaries]
        assert COMPACTION_PREVIOUS_SUMMARY_HEADING not in requests[0]
        for number in (2, 3):
            request = requests[number - 1]
            # The previous summary is given once, as such; the new one replaces it (no quoting).
            assert request.count(f"{COMPACTION_PREVIOUS_SUMMARY_HEADING}\nS{number - 1}\n") == 1
            assert "[Summary of the conversation so far" not in request
    else:
        assert COMPACTION_SHARED_MERGE_INSTRUCTION not in json.dumps(summaries[0]["messages"])
        for number in (2, 3):
            messages = summaries[number - 1]["messages"]
            # The epoch starts with the previous summary, once; the question asks to merge it.
            head = COMPACTION_SUMMARY_MESSAGE.format(summary=f"S{number - 1}")
            assert messages[0]["content"][0]["text"] == head
            assert json.dumps(messages).count("[Summary of the conversation so far") == 1
            assert COMPACTION_SHARED_MERGE_INSTRUCTION in messages[-1]["content"][-1]["text"]
    epoch_heads = await alist(
        Message.objects.filter(metadata__type="compact")
        .order_by("position")
        .values_list("content", flat=True)
    )
    assert [h[0]["text"].rsplit("\n\n", 1)[1] for h in epoch_heads] == ["S1", "S2", "S3"]


async def test_the_scripted_summarizer_merges_and_stays_bounded(connect):
    client = await connect()
    await client.create(
        context_window=4000,
        compact_threshold=0.5,
        settings={**NO_MEMORY, "compaction": {"summary_max_tokens": 120}},
    )
    summaries = []
    for index in range(14):
        frames = await chat(client, f"request {index}: {FILLER}")
        summaries += [f["summary"] for f in frames if f["type"] == "compaction.completed"]
    assert len(summaries) >= 3
    for summary in summaries:
        assert summary.count("User requests:") == 1 and "[Summary" not in summary
        assert len(summary.split()) <= 90
    assert "request 0" not in summaries[-1] and "earlier requests left out" in summaries[-1]


async def test_a_message_that_cannot_fit_at_all_is_refused_and_nothing_is_stored(connect):
    client = await connect()
    await client.create(context_window=2000, settings=NO_MEMORY)
    await client.send({"type": "user.message", "content": "palimpsest " * 3000, "request_id": 7})
    reply = await client.recv()
    assert (reply["type"], reply["code"], reply["request_id"]) == ("error", "context_window_too_small", 7)
    assert await sync_to_async(Message.objects.count)() == 0
    assert await sync_to_async(MaskedResult.objects.count)() == 0
    frames = await chat(client, "echo still here")
    assert frames[-1]["stop_reason"] == "end_turn"


async def test_a_huge_message_is_estimated_off_the_shared_thread_and_never_tokenized(connect, monkeypatch):
    from sessions_app.engine.compaction import budget
    from sessions_app.services import messages

    def no_tokenizing_here(content: Any) -> int:
        raise AssertionError("the shared database thread tokenized a user message")

    monkeypatch.setattr(messages, "estimate_json_tokens", no_tokenizing_here)
    client = await connect()
    await client.create(context_window=10_000_000, settings=NO_MEMORY)
    huge = "palimpsest " * 200_000  # 2.2 MB
    frames = await chat(client, "echo " + huge)
    assert frames[-1]["stop_reason"] == "end_turn"
    stored = await sync_to_async(Message.objects.filter(role="user").first)()
    assert stored is not None and stored.token_estimate == budget.message_estimate("echo " + huge)
    assert stored.token_estimate < len(huge)  # the cheap bound, not a character count


async def test_a_small_window_with_every_tool_keeps_answering_across_compactions(connect):
    # Seen when trying it: after its first compaction such a session refused every message, its
    # headroom treating a new epoch as if the session's token ratio were unknown.
    # 4,600: every tool's definitions are about 2,000 tokens since `scratchpad_read` is offered
    # from the start (issue 32: a tool list that changes mid-session rewrites the cached prefix).
    client = await connect()
    await client.create(context_window=4600, compact_threshold=0.5)
    stops, compactions = [], 0
    for index in range(5):
        frames = await chat(client, f"request {index}: {FILLER}")
        stops.append(frames[-1]["stop_reason"])
        compactions += sum(f["type"] == "compaction.completed" for f in frames)
    assert stops == ["end_turn"] * 5 and compactions >= 2


@pytest.fixture
def many_logs(settings: Any, tmp_path: Any) -> list[str]:
    """Twenty-four ~2.5 KB logs in the file tools' folder (~800 tokens each)."""
    settings.PALIMPSEST_FS_ROOT = str(tmp_path)
    texts = [log_text(40, f"R{n}") for n in range(24)]
    for n, content in enumerate(texts):
        (tmp_path / f"log{n}.txt").write_text(content)
    return texts


async def masking_batches(connect: Any, strict_fake: Any, low_water: float) -> list[dict]:
    fake = strict_fake(12_000)
    fake.default_reply = reads_then("read them all", 24)
    client = await connect()
    await client.create(
        model=MODEL,
        context_window=12_000,
        compact_threshold=0.8,
        settings={**WITH_STORE, "compaction": {"mask_low_water": low_water}},
    )
    frames = await chat(client, "read the logs")
    no_errors(fake, frames)
    assert frames[-1]["stop_reason"] == "end_turn"
    return [f for f in frames if f["type"] == "compaction.masked"]


async def test_masking_works_in_batches_down_to_the_low_water_mark(connect, strict_fake, many_logs):
    # Issue 32: masking "just enough" near the threshold masked one more result on almost every
    # call, and each masking rewrites the prompt cache from the first result it masks.
    batches = await masking_batches(connect, strict_fake, 0.7)
    just_enough = await masking_batches(connect, strict_fake, 1.0)
    assert len(batches) < len(just_enough) / 2
    assert all(len(b["masked"]) >= 3 for b in batches)
    # Each batch brought the request down to the low-water mark (70% of the threshold's limit),
    # well below where it started.
    assert all(b["tokens_after"] < 0.8 * b["tokens_before"] for b in batches)
