"""The anthropic provider through the real SDK against the fake Messages API (HTTP + SSE)."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.engine.providers.anthropic import STREAM_RETRIES, AnthropicProvider, anthropic_client
from sessions_app.engine.providers.base import ProviderError
from sessions_app.models import AgentSession, Message, ModelCall, ToolCall
from tests.conftest import alist
from tests.fake_anthropic import aborted, error, overloaded_mid_stream, stalled, text, tool_use, truncated
from tests.sessions_app.conftest import CLIENT_TOOL, NO_MEMORY

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"


async def test_turn_streams_deltas_from_the_sse_stream(connect, fake_anthropic):
    fake_anthropic.enqueue(text("The quick brown fox jumps over the lazy dog"))
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "tell me"})
    frames = await client.until("turn.completed")
    deltas = [f["text"] for f in frames if f["type"] == "assistant.delta"]
    assert "".join(deltas) == "The quick brown fox jumps over the lazy dog"
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert message["content"] == [{"type": "text", "text": "The quick brown fox jumps over the lazy dog"}]
    usage = next(f for f in frames if f["type"] == "usage")
    served = fake_anthropic.requests[0].usage
    assert usage["input_tokens"] == served["input_tokens"]
    assert usage["output_tokens"] == served["output_tokens"]
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_deltas_arrive_while_the_model_is_still_writing(connect, fake_anthropic):
    fake_anthropic.chunk_delay_seconds = 0.08
    fake_anthropic.enqueue(text("one two three four five six seven eight"))
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "count"})
    frames = await client.until("turn.completed")
    deltas = [f for f in frames if f["type"] == "assistant.delta"]
    assert len(deltas) >= 3  # streamed in pieces, not one block at the end
    await client.close()


async def test_request_has_cache_breakpoints_on_stable_prefix_and_last_message(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You are terse.", tools=[CLIENT_TOOL], settings=NO_MEMORY)
    await client.send({"type": "user.message", "content": "hello"})
    await client.until("turn.completed")
    body = fake_anthropic.requests[0].body
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [CLIENT_TOOL]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    await client.close()


async def test_second_turn_reads_the_history_from_the_cache(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You are a careful assistant. " * 20)
    for content in ["first question", "second question"]:
        await client.send({"type": "user.message", "content": content})
        frames = await client.until("turn.completed")
    usage = next(f for f in frames if f["type"] == "usage")
    first_prompt = fake_anthropic.requests[0].usage
    assert (
        usage["cache_read_input_tokens"]
        >= first_prompt["input_tokens"] + first_prompt["cache_creation_input_tokens"] - 10
    )
    assert usage["cache_read_input_tokens"] > usage["input_tokens"]
    session = await sync_to_async(AgentSession.objects.get)()
    assert session.last_prompt_tokens == (
        usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    )
    await client.close()


async def test_recorded_request_rebuilds_exactly_what_the_server_received(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, system_prompt="sys", tools=[CLIENT_TOOL])
    fake_anthropic.enqueue(tool_use("client_lookup", {"q": "x"}), text("done"))
    await client.send({"type": "user.message", "content": "look it up"})
    call = (await client.until("tool.call"))[-1]
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "found"})
    await client.until("turn.completed")
    await client.send({"type": "user.message", "content": "and again"})
    await client.until("turn.completed")
    calls = await alist(ModelCall.objects.order_by("started_at"))
    assert len(calls) == len(fake_anthropic.requests) == 3
    for recorded, received in zip(calls, fake_anthropic.requests, strict=True):
        assert await sync_to_async(selectors.model_call_request)(call=recorded) == received.body
        assert received.raw == await sync_to_async(selectors.request_canonical_bytes)(received.body)
        assert await sync_to_async(selectors.model_call_request_verified)(call=recorded)
    # Stored messages travel by reference, not copied into every record.
    assert any("$messages" in m for m in calls[2].request["messages"])
    assert calls[2].stable_prefix_bytes > 0
    assert calls[2].response["content"] == [{"type": "text", "text": "ok"}]
    assert calls[1].step == 2 and calls[1].purpose == "turn"
    await client.close()


async def test_tool_use_streamed_with_json_deltas_reaches_the_client_intact(connect, fake_anthropic):
    payload = {"q": "naïve café ☕", "nested": {"list": [1, 2, {"deep": True}]}}
    fake_anthropic.enqueue(tool_use("client_lookup", payload, text="Let me check."), text("thanks"))
    client = await connect()
    await client.create(model=MODEL, tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "check"})
    call = (await client.until("tool.call"))[-1]
    assert call["input"] == payload
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "ok"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    second = fake_anthropic.requests[1].body["messages"]
    assert second[1]["content"][1]["input"] == payload
    assert second[2]["content"][0]["type"] == "tool_result"
    await client.close()


async def test_api_error_ends_turn_with_error_event_and_session_recovers(connect, fake_anthropic):
    fake_anthropic.enqueue(error(400, "invalid_request_error", "messages: something is off"))
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "fail please"})
    frames = await client.until("turn.completed")
    err = next(f for f in frames if f["type"] == "error")
    assert err["code"] == "model_error"
    assert "something is off" in err["message"]
    assert "seq" in err
    assert frames[-1]["stop_reason"] == "error"
    session = await sync_to_async(AgentSession.objects.get)()
    assert session.status == "error" and session.current_turn_id is None
    failed = await sync_to_async(ModelCall.objects.get)()
    assert "something is off" in failed.error
    await client.send({"type": "user.message", "content": "again"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    assert (await sync_to_async(AgentSession.objects.get)()).status == "idle"
    await client.close()


async def test_overloaded_is_retried_by_the_sdk(connect, fake_anthropic):
    fake_anthropic.enqueue(error(529, "overloaded_error", "Overloaded"), text("made it"))
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "try"})
    frames = await client.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert len(fake_anthropic.requests) == 2
    await client.close()


async def test_prompt_too_long_is_its_own_kind(fake_anthropic):
    fake_anthropic.enqueue(
        error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    )
    provider = AnthropicProvider(api_key="k", base_url=fake_anthropic.url)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
        )
    assert caught.value.kind == "prompt_too_long"
    assert caught.value.status == 400


async def test_unreachable_api_is_a_connection_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = AnthropicProvider(api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
        )
    assert caught.value.kind == "connection"


async def test_one_call_at_a_time_keeps_to_one_client_and_its_connection(connect, fake_anthropic):
    """A process whose model calls come one at a time takes the same client each time, and its
    connection stays open between them: taken in turn, each call went to another client, which
    had closed its idle connection (a new TCP connection, and TLS handshake, per call)."""
    from sessions_app.engine.providers.anthropic import CLIENT_POOLS

    client = await connect()
    await client.create(model=MODEL)
    for content in ["a", "b", "c", "d"]:
        await client.send({"type": "user.message", "content": content})
        await client.until("turn.completed")
    ports = {request.client_port for request in fake_anthropic.requests}
    assert len(fake_anthropic.requests) == 4 and len(ports) == 1, ports
    with anthropic_client(api_key="test-key", base_url=fake_anthropic.url) as first:
        pass
    with anthropic_client(api_key="test-key", base_url=fake_anthropic.url) as again:
        assert again is first
    assert CLIENT_POOLS > 1
    await client.close()


async def test_calls_at_once_spread_over_a_few_clients():
    """Calls in flight at once each take the client with the fewest in flight: a fixed few
    clients, whatever the number of calls, none with more than its share (a pool's bookkeeping
    walks all of its requests at every start and end)."""
    from sessions_app.engine.providers.anthropic import CLIENT_POOLS

    with contextlib.ExitStack() as stack:
        taken = [
            stack.enter_context(anthropic_client(api_key="spread-key", base_url="http://model.invalid"))
            for _ in range(2 * CLIENT_POOLS + 3)
        ]
        counts: dict[int, int] = {}
        for sdk_client in taken:
            counts[id(sdk_client)] = counts.get(id(sdk_client), 0) + 1
        assert len(counts) == CLIENT_POOLS
        assert sorted(set(counts.values())) == [2, 3]
    # All given back: the next call takes the first client again.
    with anthropic_client(api_key="spread-key", base_url="http://model.invalid") as sdk_client:
        assert sdk_client is taken[0]


async def test_the_sdk_clients_share_one_tls_context(monkeypatch):
    """Each SDK client made its own TLS context (its CA bundle loaded, ~35 ms): the first model
    calls of a process paid it, one per client. One context serves them all."""
    import ssl

    from sessions_app.engine.providers import anthropic as provider_module
    from sessions_app.engine.providers.anthropic import CLIENT_POOLS

    made: list[ssl.SSLContext] = []
    real = provider_module._http.create_ssl_context

    def counted(*args, **kwargs):
        context = real(*args, **kwargs)
        if not args and not isinstance(kwargs.get("verify"), ssl.SSLContext):
            made.append(context)
        return context

    monkeypatch.setattr(provider_module._http, "create_ssl_context", counted)
    provider_module._tls_context.cache_clear()
    with contextlib.ExitStack() as stack:  # all in flight at once: every client is made
        clients = {
            id(stack.enter_context(anthropic_client(api_key="tls-key", base_url="https://model.invalid")))
            for _ in range(CLIENT_POOLS)
        }
    assert len(clients) == CLIENT_POOLS
    assert len(made) == 1
    provider_module._tls_context.cache_clear()


async def test_scripted_model_name_uses_the_scripted_provider_even_with_a_key(connect, fake_anthropic):
    client = await connect()
    await client.create(model="scripted")
    await client.send({"type": "user.message", "content": "echo offline"})
    frames = await client.until("turn.completed")
    assert next(f for f in frames if f["type"] == "assistant.message")["content"][0]["text"] == "offline"
    assert fake_anthropic.requests == []
    await client.close()


@pytest.mark.parametrize("content", [[], [{"type": "text", "text": ""}]])
async def test_an_empty_answer_is_not_stored_and_the_next_request_stays_valid(
    connect, fake_anthropic, content
):
    from tests.fake_anthropic import Reply

    fake_anthropic.enqueue(Reply(content=content), text("back again"))
    client = await connect()
    await client.create(model=MODEL, settings=NO_MEMORY)
    frames = await chat_frames(client, "say nothing")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert not any(f["type"] == "assistant.message" for f in frames)
    assert any(f["type"] == "usage" for f in frames)
    assert await sync_to_async(ModelCall.objects.count)() == 1
    await chat_frames(client, "now talk")
    sent = fake_anthropic.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert [b["text"] for b in sent[0]["content"]] == ["say nothing", "now talk"]
    await client.close()


async def chat_frames(client, content: str) -> list[dict]:
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed")


# -- streams that break (a truncated stream is not an answer) ---------------------------------
BODY = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
LOOKUP = {"q": "the weather in a town with a long name"}


def _fast_provider(url: str, **kwargs) -> AnthropicProvider:
    return AnthropicProvider(api_key="k", base_url=url, stream_retry_seconds=0.01, **kwargs)


@pytest.mark.parametrize("breakage", [truncated, aborted])
async def test_a_stream_broken_before_any_text_is_retried_from_scratch(fake_anthropic, breakage):
    fake_anthropic.enqueue(breakage(text("lost")), text("whole answer"))
    seen: list[str] = []

    async def on_text(chunk: str) -> None:
        seen.append(chunk)

    response = await _fast_provider(fake_anthropic.url).complete(BODY, on_text=on_text)
    assert response.content == [{"type": "text", "text": "whole answer"}]
    assert "".join(seen) == "whole answer"
    assert len(fake_anthropic.requests) == 2


@pytest.mark.parametrize("breakage", [truncated, aborted])
async def test_a_stream_broken_after_text_was_streamed_is_a_retryable_model_error(fake_anthropic, breakage):
    fake_anthropic.enqueue(breakage(text("one two three four five"), after_events=5), text("never asked"))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_anthropic.url).complete(BODY, on_text=_ignore)
    assert caught.value.kind == "stream"
    assert caught.value.retryable
    assert len(fake_anthropic.requests) == 1  # its text reached clients already: not retried


async def test_a_stream_that_keeps_breaking_fails_after_bounded_retries(fake_anthropic):
    fake_anthropic.enqueue(*[aborted(text("x"))] * (STREAM_RETRIES + 1), text("too late"))
    with pytest.raises(ProviderError) as caught:
        await _fast_provider(fake_anthropic.url).complete(BODY)
    assert caught.value.kind == "stream"
    assert len(fake_anthropic.requests) == STREAM_RETRIES + 1


async def test_an_overloaded_error_inside_the_stream_is_retried(fake_anthropic):
    fake_anthropic.enqueue(overloaded_mid_stream(text("busy")), text("made it"))
    response = await _fast_provider(fake_anthropic.url).complete(BODY)
    assert response.content == [{"type": "text", "text": "made it"}]
    assert len(fake_anthropic.requests) == 2


async def test_a_silent_stream_is_a_model_error_and_retried(fake_anthropic):
    fake_anthropic.enqueue(stalled(text("slow"), seconds=10), text("awake"))
    provider = _fast_provider(fake_anthropic.url, idle_seconds=0.5)
    response = await provider.complete(BODY)
    assert response.content == [{"type": "text", "text": "awake"}]
    assert len(fake_anthropic.requests) == 2


async def test_a_silent_stream_fails_as_idle_when_it_stays_silent(fake_anthropic):
    fake_anthropic.enqueue(*[stalled(text("slow"), seconds=10)] * (STREAM_RETRIES + 1))
    provider = _fast_provider(fake_anthropic.url, idle_seconds=0.3)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(BODY)
    assert caught.value.kind == "idle" and caught.value.retryable


async def test_a_short_pause_is_not_silence(fake_anthropic):
    fake_anthropic.enqueue(stalled(text("fine"), after_events=3, seconds=0.2))
    response = await _fast_provider(fake_anthropic.url, idle_seconds=2).complete(BODY)
    assert response.content == [{"type": "text", "text": "fine"}]


async def _ignore(chunk: str) -> None:
    pass


async def test_a_truncated_answer_is_never_stored_as_the_final_text(connect, fake_anthropic, settings):
    fake_anthropic.enqueue(truncated(text("half of an answer that goes on"), after_events=5))
    client = await connect()
    await client.create(model=MODEL)
    frames = await chat_frames(client, "tell me")
    err = next(f for f in frames if f["type"] == "error")
    assert err["code"] == "model_error"
    assert not any(f["type"] == "assistant.message" for f in frames)
    assert frames[-1]["stop_reason"] == "error"
    stored = await alist(Message.objects.filter(role="assistant"))
    assert stored == []
    await client.close()


async def test_an_aborted_stream_is_a_model_error_not_an_internal_error(connect, fake_anthropic, settings):
    fake_anthropic.enqueue(aborted(text("half of an answer that goes on"), after_events=5))
    client = await connect()
    await client.create(model=MODEL)
    frames = await chat_frames(client, "tell me")
    assert [f["code"] for f in frames if f["type"] == "error"] == ["model_error"]
    assert frames[-1]["stop_reason"] == "error"
    await client.close()


async def test_a_cut_off_tool_call_is_never_run_with_empty_input(connect, fake_anthropic, settings):
    # message_start, content_block_start, ping, then two of the input's JSON pieces: cut there.
    cut = aborted(tool_use("client_lookup", LOOKUP), after_events=5)
    fake_anthropic.enqueue(*[cut] * (STREAM_RETRIES + 1))
    client = await connect()
    await client.create(model=MODEL, tools=[CLIENT_TOOL])
    frames = await chat_frames(client, "look it up")
    assert not any(f["type"] == "tool.call" for f in frames)
    assert [f["code"] for f in frames if f["type"] == "error"] == ["model_error"]
    assert await sync_to_async(ToolCall.objects.count)() == 0
    await client.close()


async def test_a_cut_off_tool_call_is_asked_again_and_run_with_its_whole_input(
    connect, fake_anthropic, settings
):
    whole = tool_use("client_lookup", LOOKUP)
    fake_anthropic.enqueue(truncated(whole, after_events=5), whole, text("thanks"))
    client = await connect()
    await client.create(model=MODEL, tools=[CLIENT_TOOL])
    await client.send({"type": "user.message", "content": "look it up"})
    call = (await client.until("tool.call"))[-1]
    assert call["input"] == LOOKUP
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "sunny"})
    assert (await client.until("turn.completed"))[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_the_idle_limit_comes_from_settings(settings):
    from sessions_app.engine.providers import provider_for_model

    settings.PALIMPSEST_PROVIDER = "anthropic"
    settings.PALIMPSEST_MODEL_IDLE_SECONDS = 7.5
    provider = provider_for_model(MODEL)
    assert isinstance(provider, AnthropicProvider) and provider.idle_seconds == 7.5


async def test_silence_before_the_stream_starts_is_left_to_the_sdks_retries(fake_anthropic):
    fake_anthropic.latency_seconds = 1.0  # no headers for a second
    provider = _fast_provider(fake_anthropic.url, idle_seconds=0.3, max_retries=1)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(BODY)
    assert caught.value.kind == "idle"
    assert len(fake_anthropic.requests) == 2  # the SDK's two attempts, none of ours on top


async def test_streamed_text_reaches_clients_while_the_model_stalls(connect, fake_anthropic, settings):
    # Three words arrive, then the stream goes silent for far longer than the test waits for them:
    # the text already streamed must be flushed by the buffer's timer, not by the next piece.
    settings.PALIMPSEST_MODEL_IDLE_SECONDS = 60
    fake_anthropic.enqueue(stalled(text("one two three four"), after_events=6, seconds=60))
    client = await connect()
    await client.create(model=MODEL)
    await client.send({"type": "user.message", "content": "hi"})
    frames = await client.until("assistant.delta", timeout=20)
    assert frames[-1]["text"].startswith("one ")
    await client.send({"type": "turn.cancel"})
    await client.until("turn.completed", timeout=20)


@pytest.mark.parametrize("breakage", [None, truncated])
async def test_an_encoded_body_is_sent_as_it_is_and_again_on_a_retry(fake_anthropic, breakage):
    from sessions_app.engine.context import canonical_json

    body = {**BODY, "system": [{"type": "text", "text": "Über straße"}]}
    reply = text("fine")
    fake_anthropic.enqueue(*([breakage(reply)] if breakage else []), reply)
    response = await _fast_provider(fake_anthropic.url).complete(body, encoded=canonical_json(body))
    assert response.content == [{"type": "text", "text": "fine"}]
    for request in fake_anthropic.requests:
        assert request.body == {**body, "stream": True}
        assert request.headers["content-type"] == "application/json"
    assert len(fake_anthropic.requests) == (2 if breakage else 1)


def test_the_answer_is_put_together_from_the_raw_events_as_the_api_returns_it_whole():
    """The provider assembles the answer from the SDK's raw events (no model object per event,
    a tool's input parsed once): text, a tool's input in pieces, a tool without input, thinking
    with its signature, and the usage of `message_start` updated by `message_delta`."""
    from sessions_app.engine.providers.anthropic import _Attempt

    attempt = _Attempt()
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 7}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "", "citations": None},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"pat'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'tern": "x"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        },
        {"type": "content_block_stop", "index": 3},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    streamed = [attempt.follow(event) for event in events]
    assert "".join(streamed) == "Hello"
    AnthropicProvider._check_complete(attempt)
    assert attempt.content() == [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "x"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
    ]
    assert attempt.message["usage"] == {"input_tokens": 7, "output_tokens": 9}
    assert attempt.message["stop_reason"] == "tool_use"


async def test_a_model_call_writes_no_log_line_of_the_http_client(fake_anthropic, caplog):
    """daphne logs at INFO; the SDK's HTTP client would add a line for every model call."""
    import logging

    caplog.set_level(logging.INFO)
    fake_anthropic.enqueue(text("quiet"))
    response = await _fast_provider(fake_anthropic.url).complete(BODY)
    assert response.content == [{"type": "text", "text": "quiet"}]
    assert [r for r in caplog.records if r.name.startswith("httpx")] == []
    logging.getLogger("httpx2").setLevel(logging.INFO)  # what the setting prevents
    try:
        fake_anthropic.enqueue(text("loud"))
        await _fast_provider(fake_anthropic.url).complete(BODY)
    finally:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("httpx")] != []
