"""The OpenAI provider: `AsyncOpenAI`'s Chat Completions, streaming, with the SDK's own retries
and ours (OpenAI itself, or any compatible server at OPENAI_BASE_URL: vLLM, Ollama, llama.cpp's).

The engine's request (Anthropic Messages format) is mapped to Chat Completions (`mapping`), and
the streamed answer is put together into the engine's (`answer`). The retry rules are the
Anthropic provider's: the SDK retries a request (connection errors, 408/409/429/5xx) until its
stream starts; a stream that then breaks (the connection drops, the body ends before a finish
reason, an error chunk arrives, or nothing comes for `idle_seconds`) is sent again whole, up to
STREAM_RETRIES times with a doubling pause, while none of its text reached `on_text`. Text
already streamed cannot be taken back, so after that a broken stream is a `ProviderError`. A
request longer than the model's window is kind `prompt_too_long`, which the engine answers with
its reactive compaction.

A stream that ends without usage (llama-cpp-python's server ignores `stream_options`) is followed
by the same request unstreamed with an output budget of one token: every Chat Completions
answer that is not streamed carries usage, so the window's calibration gets the server's own count
of the prompt (its tokenizer, its chat template) instead of our estimate. A server that caches the
prompt's prefix (llama.cpp does) answers it from that cache. Should that request fail, the
prompt's local estimate stands in.

A stream that ends at once with no chunk, for a request holding a list of content parts, is the
mark of a chat template that takes only strings (SmolLM2's under llama-cpp-python's server): the
request is sent again at once with its text blocks joined into strings, and so is every later
request to that server (`STRING_CONTENT_SERVERS`, per process). The same server refuses an
assistant message whose content is null (one that only calls tools, as OpenAI takes it) with a
validation error ("Input should be a valid string"): the request is sent again with "" there, and
that server gets strings only from then on too.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai

from sessions_app.engine.providers.base import ModelResponse, ProviderError, TextCallback
from sessions_app.engine.providers.clients import pooled_client
from sessions_app.engine.providers.openai.answer import ChatAnswer
from sessions_app.engine.providers.openai.mapping import (
    chat_request,
    has_null_content,
    has_parts_list,
    max_tokens_field,
)

__all__ = ["OpenAIProvider", "openai_client"]

# Our own attempts after the first, for a stream that broke before any of its text was streamed.
STREAM_RETRIES = 2
STREAM_RETRY_SECONDS = 1.0
DEFAULT_IDLE_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 10.0
# A server reached by its base URL alone (a local one) may want no key; the SDK wants one to send.
KEYLESS_API_KEY = "unused"
# The base URLs of the servers found to take only string contents (see the module's docstring).
STRING_CONTENT_SERVERS: set[str | None] = set()
# The output budget of the request that only counts a prompt (the stream sent no usage).
COUNT_MAX_TOKENS = 1
# How servers say a request is longer than the model's window: OpenAI's error code, llama.cpp's
# error type, and the words of OpenAI's, vLLM's and others' messages.
CONTEXT_LENGTH_CODES = frozenset({"context_length_exceeded"})
CONTEXT_LENGTH_TYPES = frozenset({"exceed_context_size_error"})
CONTEXT_LENGTH_WORDS = ("maximum context length", "context length", "context window", "context size")
CONTEXT_LENGTH_STATUSES = (400, 413)

# The SDK's HTTP library, found from the SDK's own client class (as the Anthropic provider does).
_http: Any = importlib.import_module(
    next(
        cls.__module__
        for cls in openai.DefaultAsyncHttpxClient.__mro__
        if cls.__name__ == "AsyncClient" and cls.__module__ != "openai"
    ).partition(".")[0]
)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every client: each would load the CA bundle again otherwise."""
    return _http.create_ssl_context()


@contextmanager
def openai_client(
    *, api_key: str, base_url: str | None, max_retries: int = 2
) -> Iterator[openai.AsyncOpenAI]:
    """The client for one call, counted in flight until the block ends (`clients.pooled_client`)."""

    def make() -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=api_key or KEYLESS_API_KEY,
            base_url=base_url,
            max_retries=max_retries,
            http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context()),
        )

    with pooled_client(("openai", api_key, base_url, max_retries), make) as client:
        yield client


def _is_context_length(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in CONTEXT_LENGTH_STATUSES:
        return False
    if exc.code in CONTEXT_LENGTH_CODES or exc.type in CONTEXT_LENGTH_TYPES:
        return True
    text = str(exc.message).lower()
    return any(words in text for words in CONTEXT_LENGTH_WORDS)


def _error_message(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return exc.message


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        max_retries: int = 2,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        stream_retries: int = STREAM_RETRIES,
        stream_retry_seconds: float = STREAM_RETRY_SECONDS,
        stream: bool = True,
    ) -> None:
        # `stream=False` (PALIMPSEST_OPENAI_STREAM=0): each answer is asked for whole, for servers
        # that cannot stream a tool call (llama-cpp-python's `chatml-function-calling`); its text
        # is announced at once, when it has come.
        self.stream = stream
        self.api_key = api_key
        self.base_url = base_url
        self.max_retries = max_retries
        self.idle_seconds = idle_seconds
        self.stream_retries = stream_retries
        self.stream_retry_seconds = stream_retry_seconds

    async def complete(
        self, body: dict[str, Any], *, on_text: TextCallback | None = None, encoded: bytes | None = None
    ) -> ModelResponse:
        """`body` mapped to Chat Completions (`encoded`, the engine's bytes of the Anthropic form,
        is of no use here) and streamed; see the module's docstring for the retries."""
        join_text = self.base_url in STRING_CONTENT_SERVERS
        params = chat_request(body, base_url=self.base_url, join_text=join_text)
        retries_left = self.stream_retries
        pause = self.stream_retry_seconds
        while True:
            answer = ChatAnswer()
            try:
                return await self._attempt(params, on_text, answer)
            except ProviderError as exc:
                empty = exc.kind == "stream" and answer.started and not answer.chunks
                if empty and not join_text and has_parts_list(params):
                    STRING_CONTENT_SERVERS.add(self.base_url)
                    join_text = True
                    params = chat_request(body, base_url=self.base_url, join_text=True)
                    continue
                refused_null = exc.kind == "api" and exc.status in (422, 500) and "valid string" in str(exc)
                if refused_null and not join_text and has_null_content(params):
                    STRING_CONTENT_SERVERS.add(self.base_url)
                    join_text = True
                    params = chat_request(body, base_url=self.base_url, join_text=True)
                    continue
                ours = answer.started and exc.kind in ("stream", "idle")
                if not ours or answer.streamed_text or retries_left <= 0:
                    raise
            retries_left -= 1
            await asyncio.sleep(pause)
            pause *= 2

    async def _attempt(
        self, params: dict[str, Any], on_text: TextCallback | None, answer: ChatAnswer
    ) -> ModelResponse:
        with openai_client(
            api_key=self.api_key, base_url=self.base_url, max_retries=self.max_retries
        ) as client:
            return await self._attempt_with(client, params, on_text, answer)

    async def _attempt_with(
        self,
        client: openai.AsyncOpenAI,
        params: dict[str, Any],
        on_text: TextCallback | None,
        answer: ChatAnswer,
    ) -> ModelResponse:
        # The read timeout bounds every wait for bytes, before the headers and between chunks.
        timeout = openai.Timeout(self.idle_seconds, connect=min(CONNECT_TIMEOUT_SECONDS, self.idle_seconds))
        started = time.monotonic()
        first_token_ms: int | None = None
        try:
            if not self.stream:
                completion = await client.chat.completions.create(**params, timeout=timeout)
                answer.started = True
                text = answer.take(completion)
                answer.check_complete()
                if text:
                    first_token_ms = int((time.monotonic() - started) * 1000)
                    if on_text is not None:
                        answer.streamed_text = True
                        await on_text(text)
                return self._response(answer, params, first_token_ms, counted=None)
            stream = await client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True}, timeout=timeout
            )
            answer.started = True
            try:
                async for chunk in stream:
                    text = answer.follow(chunk)
                    if text:
                        if first_token_ms is None:
                            first_token_ms = int((time.monotonic() - started) * 1000)
                        if on_text is not None:
                            answer.streamed_text = True
                            await on_text(text)
            finally:
                await stream.close()
            answer.check_complete()
        except openai.APIStatusError as exc:
            kind = "prompt_too_long" if _is_context_length(exc) else "api"
            raise ProviderError(
                f"{exc.status_code}: {_error_message(exc)}", kind=kind, status=exc.status_code
            ) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"the model sent nothing for {self.idle_seconds:g} s", kind="idle") from exc
        except openai.APIConnectionError as exc:
            if answer.started:
                raise ProviderError(f"the model's stream broke off: {exc}", kind="stream") from exc
            raise ProviderError(f"cannot reach the model: {exc}", kind="connection") from exc
        except openai.APIError as exc:
            # An error chunk inside a stream that had begun: the server failed mid-answer.
            raise ProviderError(f"the model's stream failed: {_error_message(exc)}", kind="stream") from exc
        except ValueError as exc:
            # A chunk that is not JSON: a broken stream.
            raise ProviderError(f"the model's stream was malformed: {exc}", kind="stream") from exc
        counted = None if answer.has_usage() else await self._prompt_count(client, params, timeout)
        return self._response(answer, params, first_token_ms, counted=counted)

    @staticmethod
    def _response(
        answer: ChatAnswer, params: dict[str, Any], first_token_ms: int | None, *, counted: int | None
    ) -> ModelResponse:
        content = answer.content()
        usage, source = answer.usage_or_estimate(params, content, counted_prompt=counted)
        raw: dict[str, Any] = {"id": answer.id, "model": answer.model, "finish_reason": answer.finish_reason}
        if source == "estimated":
            raw["usage_estimated"] = True
        elif source == "counted":
            raw["prompt_tokens_counted"] = True
        return ModelResponse(
            content=content,
            stop_reason=answer.stop_reason(),
            usage=usage,
            raw=raw,
            first_token_ms=first_token_ms,
        )

    async def _prompt_count(
        self, client: openai.AsyncOpenAI, params: dict[str, Any], timeout: openai.Timeout
    ) -> int | None:
        """The server's count of the prompt of `params`, from the same request unstreamed with a
        one-token budget (see the module's docstring); None when it fails or counts nothing."""
        count = {k: v for k, v in params.items() if k not in ("max_tokens", "max_completion_tokens")}
        count[max_tokens_field(self.base_url)] = COUNT_MAX_TOKENS
        try:
            completion = await client.chat.completions.create(**count, timeout=timeout)
        except (openai.APIError, ValueError):
            return None
        usage = getattr(completion, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        return prompt if isinstance(prompt, int) and prompt > 0 else None
