"""The openai provider against what local servers do differently (llama-cpp-python's server, which
`make test-real-model` runs for real): each quirk reproduced by the fake Chat Completions API."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine.providers.base import ProviderError
from sessions_app.engine.providers.openai import COUNT_MAX_TOKENS, OpenAIProvider
from sessions_app.models import AgentSession, ModelCall
from tests.conftest import alist, chat
from tests.fake_openai import FakeOpenAIServer, text, tool_use_raw

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "openai/smollm2"
FILLER = "palimpsest " * 300
BODY = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}


async def test_a_stream_without_usage_is_followed_by_an_unstreamed_count_of_the_same_prompt(settings):
    # llama-cpp-python's server ignores `stream_options` and streams no usage; an answer that is
    # not streamed always carries it.
    with FakeOpenAIServer(stream_usage=False, token_ratio=1.4) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        fake.enqueue(text("streamed words"))
        response = await OpenAIProvider(api_key="", base_url=fake.url).complete(BODY)
        assert response.content == [{"type": "text", "text": "streamed words"}]
        streamed, counted = fake.requests
        assert streamed.chat["stream"] is True and streamed.usage is None
        assert "stream" not in counted.chat and counted.chat["max_tokens"] == COUNT_MAX_TOKENS
        assert counted.chat["messages"] == streamed.chat["messages"]
        assert response.usage.input_tokens == fake.count_prompt_tokens(streamed.chat)
        assert response.usage.output_tokens > 0
        assert response.raw["prompt_tokens_counted"] is True and "usage_estimated" not in response.raw


async def test_the_servers_count_calibrates_the_estimate_when_its_stream_has_no_usage(connect, settings):
    with FakeOpenAIServer(stream_usage=False, token_ratio=1.4) as fake:
        settings.PALIMPSEST_PROVIDER, settings.OPENAI_BASE_URL = "openai", fake.url
        client = await connect()
        await client.create(model=MODEL)
        for index in range(4):
            frames = await chat(client, f"message {index}: {FILLER}")
        assert any(f["type"] == "assistant.delta" for f in frames)
        streamed = [r for r in fake.requests if r.chat.get("stream")]
        calls = await alist(ModelCall.objects.order_by("started_at"))
        assert [c.input_tokens for c in calls] == [fake.count_prompt_tokens(r.chat) for r in streamed]
        assert all(c.response and c.response["prompt_tokens_counted"] for c in calls)
        session = await sync_to_async(AgentSession.objects.get)()
        assert 1.25 < session.token_ratio < 1.5
        assert session.last_prompt_tokens == calls[-1].input_tokens
        await client.close()


async def test_a_server_that_never_sends_usage_falls_back_to_the_estimate_after_one_count(settings):
    with FakeOpenAIServer(send_usage=False) as fake:
        response = await OpenAIProvider(api_key="", base_url=fake.url).complete(BODY)
        assert response.raw["usage_estimated"] is True and response.usage.input_tokens > 0
        assert [bool(r.chat.get("stream")) for r in fake.requests] == [True, False]


async def test_a_server_whose_template_takes_only_strings_gets_text_blocks_joined_from_then_on():
    # SmolLM2's chat template adds each content to a string: a list of parts fails it, and
    # llama-cpp-python's server then ends the stream at once with no chunk.
    two_blocks: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "[scratchpad] nothing yet"},
                    {"type": "text", "text": "hi"},
                ],
            }
        ],
    }
    with FakeOpenAIServer(string_contents=True) as fake:
        fake.enqueue(text("hello"), text("again"))
        provider = OpenAIProvider(api_key="", base_url=fake.url, stream_retry_seconds=0.01)
        response = await provider.complete(two_blocks)
        assert response.content == [{"type": "text", "text": "hello"}]
        sent = [r.chat["messages"][0]["content"] for r in fake.requests if r.chat.get("stream")]
        assert sent == [two_blocks["messages"][0]["content"], "[scratchpad] nothing yet\n\nhi"]
        fake.requests.clear()
        response = await provider.complete(two_blocks)
        assert response.content == [{"type": "text", "text": "again"}]
        assert fake.requests[0].chat["messages"][0]["content"] == "[scratchpad] nothing yet\n\nhi"


async def test_a_server_that_takes_lists_keeps_getting_the_blocks_apart(fake_openai):
    two = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": two}]}
    await OpenAIProvider(api_key="", base_url=fake_openai.url).complete(body)
    assert fake_openai.requests[0].chat["messages"][0]["content"] == two


async def test_an_image_that_a_strings_only_template_refuses_is_a_stream_error_not_a_loop():
    image = {"type": "image", "source": {"type": "url", "url": "http://127.0.0.1:9/x.png"}}
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": [image]}]}
    with FakeOpenAIServer(string_contents=True) as fake:
        provider = OpenAIProvider(api_key="", base_url=fake.url, stream_retry_seconds=0.01)
        with pytest.raises(ProviderError) as caught:
            await provider.complete(body)
        assert caught.value.kind == "stream"
        assert all(isinstance(r.chat["messages"][0]["content"], list) for r in fake.requests)


async def test_a_server_that_refuses_null_assistant_content_gets_an_empty_string_from_then_on():
    # llama-cpp-python's request schema wants an assistant message's content to be a string; OpenAI
    # takes null for one that only calls tools. The refusal is a 500 naming the string.
    called: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "fs_read", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}]},
        ],
    }
    with FakeOpenAIServer(string_contents=True) as fake:
        fake.enqueue(text("read"), text("again"))
        provider = OpenAIProvider(api_key="", base_url=fake.url, stream_retry_seconds=0.01, stream=False)
        response = await provider.complete(called)
        assert response.content == [{"type": "text", "text": "read"}]
        assert [r.chat["messages"][1]["content"] for r in fake.requests] == [None, ""]
        fake.requests.clear()
        await provider.complete(called)
        assert [r.chat["messages"][1]["content"] for r in fake.requests] == [""]  # at once, from then on


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_arguments_holding_a_raw_newline_in_a_string_are_taken(stream: bool):
    # llama.cpp's JSON grammar lets the model write a raw newline inside a string, which strict
    # JSON refuses: the answer was a stream error, retried to the same answer, then the turn failed.
    arguments = '{ "text": "one\ntwo\tthree" } '
    with FakeOpenAIServer() as fake:
        fake.enqueue(tool_use_raw("count_words", arguments))
        provider = OpenAIProvider(api_key="", base_url=fake.url, stream=stream)
        response = await provider.complete(BODY)
        (call,) = response.content
        assert call["type"] == "tool_use" and call["name"] == "count_words"
        assert call["input"] == {"text": "one\ntwo\tthree"}
        assert len([r for r in fake.requests if bool(r.chat.get("stream")) == stream]) == 1
