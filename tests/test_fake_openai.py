"""The fake Chat Completions server, exercised only through the real ``openai`` SDK (no Django, no
patching): strict where the real API is, and streaming as it does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.fake_openai import FakeOpenAIServer, context_length_error, messages_view, text, tool_use

MODEL = "gpt-4.1"
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(strict=True) as srv:
        yield srv


@pytest.fixture
def client(server: FakeOpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key="test-key", base_url=server.url, max_retries=0) as c:
        yield c


def create(client: openai.OpenAI, messages: Any, **kwargs: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


def refused(client: openai.OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, messages, **kwargs)
    return str(caught.value.message)


def test_a_tool_call_answered_right_after_is_accepted(client, server):
    server.enqueue(text("fine"))
    answer = create(
        client,
        [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "found"},
            {"role": "user", "content": "and?"},
        ],
        tools=[TOOL],
    )
    assert answer.choices[0].message.content == "fine"


def test_tool_calls_without_their_answers_right_after_are_refused(client):
    message = refused(
        client,
        [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "user", "content": "never mind"},
        ],
    )
    assert "did not have response messages: call_1" in message


def test_a_tool_message_without_a_preceding_call_is_refused(client):
    message = refused(
        client,
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1", "content": "x"}],
    )
    assert "must be a response to a preceeding message with 'tool_calls'" in message


def test_a_bad_tool_name_is_refused(client):
    bad = {"type": "function", "function": {"name": "no spaces allowed", "parameters": {"type": "object"}}}
    assert "does not match pattern" in refused(client, [{"role": "user", "content": "hi"}], tools=[bad])


def test_a_stream_assembles_text_tool_calls_and_usage_only_when_asked(server, client):
    server.enqueue(tool_use("lookup", {"q": "a long enough query"}, id="call_7", text="Checking."))
    chunks = list(
        create(
            client, [{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True}
        )
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert arguments == '{"q": "a long enough query"}'
    assert len([c for c in chunks if c.choices and c.choices[0].delta.tool_calls]) > 2  # in pieces
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens > 0
    server.enqueue(text("no usage"))
    plain = list(create(client, [{"role": "user", "content": "hi"}], stream=True))
    assert all(c.usage is None for c in plain)


def test_a_repeated_long_prefix_is_reported_as_cached_tokens(server, client):
    system = {"role": "system", "content": "Be careful. " * 600}
    first = create(client, [system, {"role": "user", "content": "one"}])
    again = create(client, [system, {"role": "user", "content": "two"}])
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached < again.usage.prompt_tokens


def test_a_prompt_over_the_window_is_refused_as_openai_does():
    with (
        FakeOpenAIServer(window=50) as small,
        openai.OpenAI(api_key="k", base_url=small.url, max_retries=0) as c,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        create(c, [{"role": "user", "content": "word " * 100}], max_tokens=10)
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length is 50 tokens" in str(caught.value.message)


def test_context_length_error_has_openais_code():
    assert context_length_error(10, 20).code == "context_length_exceeded"


def test_the_messages_view_reads_tool_messages_back_as_one_user_message():
    view = messages_view(
        {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": "ok", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Error: nope"},
                {"role": "user", "content": [{"type": "text", "text": "scratch"}]},
            ],
        }
    )
    assert view["system"] == "sys"
    assert view["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "nope", "is_error": True},
                {"type": "text", "text": "scratch"},
            ],
        },
    ]
