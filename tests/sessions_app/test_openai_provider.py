"""The openai provider through the real SDK against the fake Chat Completions API (HTTP + SSE)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine.providers.base import ProviderError
from sessions_app.engine.providers.openai import STREAM_RETRIES, OpenAIProvider
from sessions_app.models import AgentSession, Message, ModelCall, ToolCall
from tests.conftest import alist, chat
from tests.fake_openai import (
    ChatErrorReply,
    FakeOpenAIServer,
    Reply,
    aborted,
    context_length_error,
    error,
    stalled,
    text,
    tool_use,
    truncated,
)
from tests.sessions_app.conftest import CLIENT_TOOL, NO_MEMORY, is_summary_call

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "gpt-4.1"
FILLER = "palimpsest " * 300
LOOKUP = {"q": "naïve café ☕", "nested": {"list": [1, 2, {"deep": True}]}}
BODY = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}


def _fast_provider(url: str, **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(api_key="k", base_url=url, stream_retry_seconds=0.01, **kwargs)


async def _ignore(chunk: str) -> None:
    pass


# -- through the engine --------------------------------------------------------------------------
async def test_a_turn_streams_content_deltas_and_reports_the_servers_usage(connect, fake_openai):
    fake_openai.enqueue(text("The quick brown fox jumps over the lazy dog"))
    client = await connect()
    session = await client.create(model=MODEL)
    assert session["provider"] == "openai"
    frames = await chat(client, "tell me")
    deltas = [f["text"] for f in frames if f["type"] == "assistant.delta"]
    assert "".join(deltas) == "The quick brown fox jumps over the lazy dog"
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert message["content"] == [{"type": "text", "text": "The quick brown fox jumps over the lazy dog"}]
    usage = next(f for f in frames if f["type"] == "usage")
    served = fake_openai.requests[0].usage
    assert usage["input_tokens"] == served["prompt_tokens"]
    assert usage["output_tokens"] == served["completion_tokens"]
    assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_the_request_is_chat_completions_with_the_system_message_first_and_no_cache_marks(
    connect, fake_openai
):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You are terse.", tools=[CLIENT_TOOL], settings=NO_MEMORY)
    await chat(client, "hello")
    sent = fake_openai.requests[0].chat
    assert sent["model"] == MODEL and sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": CLIENT_TOOL["name"],
                "description": CLIENT_TOOL["description"],
                "parameters": CLIENT_TOOL["input_schema"],
            },
        }
    ]
    # Said outright (OpenAI's default with tools): llama-cpp-python's chatml-function-calling shows
    # the model the tools only when a request names a choice.
    assert sent["tool_choice"] == "auto"
    assert b"cache_control" not in fake_openai.requests[0].raw
    assert sent["max_tokens"] > 0 and "max_completion_tokens" not in sent  # a compatible server
    await client.close()


async def test_a_request_without_tools_names_no_tool_choice(fake_openai):
    provider = _fast_provider(fake_openai.url)
    await provider.complete(BODY)
    assert "tool_choice" not in fake_openai.requests[0].chat and "tools" not in fake_openai.requests[0].chat


async def test_unstreamed_answers_carry_text_tool_calls_and_the_servers_usage(connect, settings):
    """PALIMPSEST_OPENAI_STREAM=0 (a server that cannot stream a tool call): each answer is asked
    for whole; its text is announced once, its tool calls run, its usage is the server's."""
    settings.PALIMPSEST_OPENAI_STREAM = False
    with FakeOpenAIServer(strict=True) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        fake.enqueue(tool_use("client_lookup", LOOKUP, id="call_one", text="Looking."), text("found it"))
        client = await connect()
        await client.create(model=MODEL, tools=[CLIENT_TOOL], settings=NO_MEMORY)
        await client.send({"type": "user.message", "content": "look it up"})
        frames = await client.until("tool.call")
        assert [f["text"] for f in frames if f["type"] == "assistant.delta"] == ["Looking."]
        assert (frames[-1]["tool_use_id"], frames[-1]["input"]) == ("call_one", LOOKUP)
        await client.send({"type": "tool.result", "tool_use_id": "call_one", "content": "found"})
        frames = await client.until("turn.completed")
        assert frames[-1]["stop_reason"] == "end_turn"
        assert [f["text"] for f in frames if f["type"] == "assistant.delta"] == ["found it"]
        usage = [f for f in frames if f["type"] == "usage"][-1]
        assert usage["input_tokens"] == (fake.requests[1].usage or {})["prompt_tokens"]
        assert [r.chat.get("stream") for r in fake.requests] == [None, None]  # nothing streamed
        assert len(fake.requests) == 2  # no second request to count the prompt: the answer had usage
        await client.close()


async def test_a_model_named_with_its_provider_is_sent_without_the_prefix(connect, fake_openai):
    client = await connect()
    session = await client.create(model="openai/gpt-4o-mini")
    assert (session["provider"], session["context_window"]) == ("openai", 128_000)
    await chat(client, "hi")
    assert fake_openai.requests[0].chat["model"] == "gpt-4o-mini"
    await client.close()


async def test_a_tool_call_streamed_in_pieces_reaches_the_client_whole_and_is_answered_by_a_tool_message(
    connect, settings
):
    with FakeOpenAIServer(strict=True) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        fake.enqueue(tool_use("client_lookup", LOOKUP, id="call_one", text="Looking."), text("done"))
        client = await connect()
        await client.create(model=MODEL, tools=[CLIENT_TOOL], settings=NO_MEMORY)
        await client.send({"type": "user.message", "content": "look it up"})
        call = (await client.until("tool.call"))[-1]
        assert (call["tool_use_id"], call["name"], call["input"]) == ("call_one", "client_lookup", LOOKUP)
        await client.send({"type": "tool.result", "tool_use_id": "call_one", "content": "found"})
        frames = await client.until("turn.completed")
        assert frames[-1]["stop_reason"] == "end_turn"
        second = fake.requests[1].chat["messages"]
        assert second[-2] == {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_one",
                    "type": "function",
                    "function": {
                        "name": "client_lookup",
                        "arguments": json.dumps(LOOKUP, ensure_ascii=False),
                    },
                }
            ],
        }
        assert second[-1] == {"role": "tool", "tool_call_id": "call_one", "content": "found"}
        await client.close()


async def test_several_tool_calls_of_one_answer_are_each_answered_in_order(connect, settings):
    with FakeOpenAIServer(strict=True) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        calls = [
            {"type": "tool_use", "id": f"call_{n}", "name": "client_lookup", "input": {"q": f"town {n}"}}
            for n in range(3)
        ]
        fake.enqueue(Reply(calls, stop_reason="tool_use"), text("all three"))
        client = await connect()
        await client.create(model=MODEL, tools=[CLIENT_TOOL], settings=NO_MEMORY)
        await client.send({"type": "user.message", "content": "three towns"})
        seen = []
        for _ in range(3):
            seen.append((await client.until("tool.call"))[-1])
        assert [(c["tool_use_id"], c["input"]) for c in seen] == [(c["id"], c["input"]) for c in calls]
        for call in reversed(seen):  # answered in any order: sent in the calls' order
            await client.send(
                {"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": call["input"]["q"]}
            )
        assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
        tools = [m for m in fake.requests[1].chat["messages"] if m["role"] == "tool"]
        assert [(m["tool_call_id"], m["content"]) for m in tools] == [
            (f"call_{n}", f"town {n}") for n in range(3)
        ]
        await client.close()


async def test_a_failed_tool_result_reads_as_an_error_to_the_model(connect, fake_openai, echo_tool):
    fake_openai.enqueue(tool_use("test_echo", {"text": "x", "fail": True}, id="call_bad"), text("sorry"))
    client = await connect()
    await client.create(model=MODEL, settings=NO_MEMORY)
    await chat(client, "echo and fail")
    (tool,) = [m for m in fake_openai.requests[1].chat["messages"] if m["role"] == "tool"]
    assert tool["content"].startswith("Error: ") and "fail was set" in tool["content"]
    await client.close()


async def test_cached_prompt_tokens_are_reported_as_cache_reads(connect, fake_openai):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You are a careful assistant. " * 200)
    await chat(client, "first question")
    frames = await chat(client, "second question")
    usage = next(f for f in frames if f["type"] == "usage")
    served = fake_openai.requests[1]
    assert served.cached_tokens >= 1024
    assert usage["cache_read_input_tokens"] == served.cached_tokens
    assert usage["input_tokens"] == served.usage["prompt_tokens"] - served.cached_tokens
    session = await sync_to_async(AgentSession.objects.get)()
    assert session.last_prompt_tokens == served.usage["prompt_tokens"]
    await client.close()


async def test_a_server_that_sends_no_usage_gets_the_local_estimate(connect, settings):
    with FakeOpenAIServer(send_usage=False) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        client = await connect()
        await client.create(model=MODEL)
        frames = await chat(client, f"a long question: {FILLER}")
        usage = next(f for f in frames if f["type"] == "usage")
        counted = fake.count_prompt_tokens(fake.requests[0].chat)
        assert abs(usage["input_tokens"] - counted) / counted < 0.2
        assert usage["output_tokens"] > 0
        call = await sync_to_async(ModelCall.objects.get)()
        assert call.response is not None and call.response["usage_estimated"] is True
        await client.close()


async def test_the_estimate_calibrates_to_the_servers_token_counts(connect, settings):
    with FakeOpenAIServer(token_ratio=1.4) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        client = await connect()
        await client.create(model=MODEL)
        for index in range(4):
            frames = await chat(client, f"message {index}: {FILLER}")
        session = await sync_to_async(AgentSession.objects.get)()
        assert 1.25 < session.token_ratio < 1.5
        predicted = next(f for f in frames if f["type"] == "usage")["estimated_next_prompt_tokens"]
        await chat(client, "short")
        last = fake.requests[-1].usage
        assert last is not None
        served = last["prompt_tokens"]
        assert abs(predicted - served) / served < 0.1
        await client.close()


@pytest.mark.parametrize("status", [429, 500])
async def test_a_busy_or_failing_server_is_retried_by_the_sdk(connect, fake_openai, status):
    fake_openai.enqueue(error(status, "server_error", "busy"), text("made it"))
    client = await connect()
    await client.create(model=MODEL)
    frames = await chat(client, "try")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert len(fake_openai.requests) == 2
    await client.close()


async def test_a_refused_request_ends_the_turn_with_a_model_error_and_the_session_recovers(
    connect, fake_openai
):
    fake_openai.enqueue(error(400, "invalid_request_error", "messages: something is off"))
    client = await connect()
    await client.create(model=MODEL)
    frames = await chat(client, "fail please")
    err = next(f for f in frames if f["type"] == "error")
    assert err["code"] == "model_error" and "something is off" in err["message"]
    assert frames[-1]["stop_reason"] == "error"
    assert (await chat(client, "again"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_context_length_refusal_compacts_at_once_and_the_turn_goes_on(connect, fake_openai):
    client = await connect()
    # The history grows in a large window, which is then made small: the estimate is wrong and
    # the server says so, and the engine's reactive compaction answers it.
    await client.create(model=MODEL, context_window=40_000, compact_threshold=1.0, settings=NO_MEMORY)
    for index in range(8):
        await chat(client, f"part {index}: {FILLER}")
    await sync_to_async(AgentSession.objects.update)(context_window=10_000)
    fake_openai.enqueue(context_length_error(10_000, 12_000))
    frames = await chat(client, "and now?")
    summaries = [r for r in fake_openai.requests if is_summary_call(r.body)]
    # The history does not fit the shrunken window in the session's layout: the separate call
    # (which splits it) summarizes.
    assert summaries and all("tools" not in r.chat for r in summaries)
    assert any(f["type"] == "compaction.completed" for f in frames)
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_cut_off_tool_call_is_never_run(connect, fake_openai):
    cut = aborted(tool_use("client_lookup", LOOKUP), after_events=3)  # the call's id, then a piece
    fake_openai.enqueue(*[cut] * (STREAM_RETRIES + 1))
    client = await connect()
    await client.create(model=MODEL, tools=[CLIENT_TOOL])
    frames = await chat(client, "look it up")
    assert not any(f["type"] == "tool.call" for f in frames)
    assert [f["code"] for f in frames if f["type"] == "error"] == ["model_error"]
    assert await sync_to_async(ToolCall.objects.count)() == 0
    await client.close()


async def test_a_truncated_answer_is_never_stored(connect, fake_openai):
    fake_openai.enqueue(truncated(text("half of an answer that goes on"), after_events=4))
    client = await connect()
    await client.create(model=MODEL)
    frames = await chat(client, "tell me")
    assert [f["code"] for f in frames if f["type"] == "error"] == ["model_error"]
    assert await alist(Message.objects.filter(role="assistant")) == []
    await client.close()


# -- the provider alone --------------------------------------------------------------------------
async def test_a_context_length_error_is_the_prompt_too_long_kind(fake_openai):
    fake_openai.enqueue(context_length_error(128_000, 130_000))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url).complete(BODY)
    assert (caught.value.kind, caught.value.status) == ("prompt_too_long", 400)


async def test_llama_cpps_context_size_error_is_the_prompt_too_long_kind(fake_openai):
    fake_openai.enqueue(
        ChatErrorReply(400, "exceed_context_size_error", "the request exceeds the available context size")
    )
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url).complete(BODY)
    assert caught.value.kind == "prompt_too_long"


async def test_another_refusal_is_not_prompt_too_long(fake_openai):
    fake_openai.enqueue(error(400, "invalid_request_error", "Invalid 'tools[0].function.name'"))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url).complete(BODY)
    assert (caught.value.kind, caught.value.retryable) == ("api", False)


@pytest.mark.parametrize("breakage", [truncated, aborted])
async def test_a_stream_broken_before_any_text_is_retried_from_scratch(fake_openai, breakage):
    fake_openai.enqueue(breakage(text("lost words here"), after_events=1), text("whole answer"))
    seen: list[str] = []

    async def on_text(chunk: str) -> None:
        seen.append(chunk)

    response = await _fast_provider(fake_openai.url).complete(BODY, on_text=on_text)
    assert response.content == [{"type": "text", "text": "whole answer"}]
    assert "".join(seen) == "whole answer"
    assert len(fake_openai.requests) == 2


@pytest.mark.parametrize("breakage", [truncated, aborted])
async def test_a_stream_broken_after_text_was_streamed_is_a_retryable_model_error(fake_openai, breakage):
    fake_openai.enqueue(breakage(text("one two three four five"), after_events=3), text("never asked"))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url).complete(BODY, on_text=_ignore)
    assert caught.value.kind == "stream" and caught.value.retryable
    assert len(fake_openai.requests) == 1


async def test_an_error_chunk_inside_the_stream_is_retried(fake_openai):
    from tests.fake_anthropic import overloaded_mid_stream

    fake_openai.enqueue(overloaded_mid_stream(text("busy")), text("made it"))
    response = await _fast_provider(fake_openai.url).complete(BODY)
    assert response.content == [{"type": "text", "text": "made it"}]
    assert len(fake_openai.requests) == 2


async def test_a_stream_that_keeps_breaking_fails_after_bounded_retries(fake_openai):
    fake_openai.enqueue(*[aborted(text("x"))] * (STREAM_RETRIES + 1), text("too late"))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url).complete(BODY)
    assert caught.value.kind == "stream"
    assert len(fake_openai.requests) == STREAM_RETRIES + 1


async def test_a_silent_stream_is_idle_and_retried(fake_openai):
    fake_openai.enqueue(stalled(text("slow"), seconds=10), text("awake"))
    response = await _fast_provider(fake_openai.url, idle_seconds=0.5).complete(BODY)
    assert response.content == [{"type": "text", "text": "awake"}]
    fake_openai.enqueue(*[stalled(text("slow"), seconds=10)] * (STREAM_RETRIES + 1))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_openai.url, idle_seconds=0.3).complete(BODY)
    assert caught.value.kind == "idle" and caught.value.retryable


async def test_an_unreachable_server_is_a_connection_error():
    provider = OpenAIProvider(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(BODY)
    assert caught.value.kind == "connection"


async def test_a_keyless_local_server_is_called_all_the_same(fake_openai):
    fake_openai.enqueue(text("local"))
    response = await OpenAIProvider(api_key="", base_url=fake_openai.url).complete(BODY)
    assert response.content == [{"type": "text", "text": "local"}]


async def test_the_answer_is_put_together_with_its_stop_reason_and_usage(fake_openai):
    fake_openai.enqueue(tool_use("lookup", {"q": "x"}, id="call_9", text="Let me see."))
    response = await _fast_provider(fake_openai.url).complete(BODY)
    assert response.content == [
        {"type": "text", "text": "Let me see."},
        {"type": "tool_use", "id": "call_9", "name": "lookup", "input": {"q": "x"}},
    ]
    assert response.stop_reason == "tool_use"
    served = fake_openai.requests[0].usage
    assert response.usage.as_dict() == {
        "input_tokens": served["prompt_tokens"],
        "output_tokens": served["completion_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert response.raw["finish_reason"] == "tool_calls" and "usage_estimated" not in response.raw
