"""The Anthropic provider: `AsyncAnthropic`, streaming, with the SDK's own retries and ours.

The SDK retries a request (connection errors, 408/409/429/5xx) only until its stream starts. A
stream that then breaks (the connection drops, the body ends without `message_stop`, an error
event arrives, or nothing comes for `idle_seconds`) is not an answer: `complete` sends the whole
request again, up to STREAM_RETRIES times with a doubling pause, but only while no text of the
failed attempt has reached `on_text`. Text already streamed cannot be taken back (clients have
shown it as `assistant.delta`), so after that a broken stream is a `ProviderError` (kind
`stream` or `idle`): the turn ends with `model_error`, nothing of the partial answer is stored,
and a cut-off `tool_use` is never run. A tool call streams no text, so its breaks are retried.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
import weakref
from typing import Any

import anthropic
from anthropic.lib.streaming import AsyncMessageStreamManager
from anthropic.types import Message, RawMessageStreamEvent

from sessions_app.engine.providers.base import ModelResponse, ProviderError, TextCallback, Usage

# The SDK's HTTP library (httpx, or the fork some SDK builds ship), found from the SDK's own
# client class: its transport errors raised while a stream is read are not wrapped by the SDK,
# which wraps only the errors raised before the response starts.
_http: Any = importlib.import_module(
    next(
        cls.__module__
        for cls in anthropic.DefaultAsyncHttpxClient.__mro__
        if cls.__name__ == "AsyncClient" and cls.__module__ != "anthropic"
    ).partition(".")[0]
)

# One client per event loop (in the server: one per process). Building a client costs tens of
# milliseconds and it pools connections, so turns share it; an httpx pool cannot cross loops.
_clients: weakref.WeakKeyDictionary[Any, dict[tuple, anthropic.AsyncAnthropic]] = weakref.WeakKeyDictionary()


def anthropic_client(*, api_key: str, base_url: str | None, max_retries: int = 2) -> anthropic.AsyncAnthropic:
    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    key = (api_key, base_url, max_retries)
    client = per_loop.get(key)
    if client is None:
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries)
        per_loop[key] = client
    return client


MODELS_API_TIMEOUT_SECONDS = 5.0
# Our own attempts after the first, for a stream that broke before any of its text was streamed.
STREAM_RETRIES = 2
# Pause before the first of those retries, doubled for each next one.
STREAM_RETRY_SECONDS = 1.0
# The default for a model stream that sends nothing (PALIMPSEST_MODEL_IDLE_SECONDS).
DEFAULT_IDLE_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 10.0
# Error events inside a stream that mean "busy or failed, ask again" (as their 5xx statuses would).
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error"})


def _stream(
    client: anthropic.AsyncAnthropic, body: dict[str, Any], encoded: bytes | None, timeout: anthropic.Timeout
) -> AsyncMessageStreamManager:
    """`client.messages.stream(**body)`; with `encoded` (the body's JSON, already built), those
    bytes are sent as they are: the SDK would otherwise copy the whole body and encode it again on
    every call, a cost that grows with the history."""
    if encoded is None or not encoded.startswith(b"{") or encoded == b"{}":
        return client.messages.stream(**body, timeout=timeout)
    request = client.post(
        "/v1/messages",
        content=b'{"stream":true,' + encoded[1:],
        options={"headers": {"Content-Type": "application/json"}, "timeout": timeout},
        cast_to=Message,
        stream=True,
        stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
    )
    return AsyncMessageStreamManager(request)


def _is_prompt_too_long(exc: anthropic.APIStatusError) -> bool:
    return exc.status_code in (400, 413) and "prompt is too long" in str(exc).lower()


class _Attempt:
    """What one streamed attempt has done so far."""

    def __init__(self) -> None:
        self.streamed_text = False
        self.started = False  # the response's headers arrived: the SDK's retries are over
        self.stopped = False  # message_stop arrived
        self.open_blocks: set[int] = set()
        self.tool_json: dict[int, list[str]] = {}


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        max_retries: int = 2,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        stream_retries: int = STREAM_RETRIES,
        stream_retry_seconds: float = STREAM_RETRY_SECONDS,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.max_retries = max_retries
        self.idle_seconds = idle_seconds
        self.stream_retries = stream_retries
        self.stream_retry_seconds = stream_retry_seconds

    async def complete(
        self, body: dict[str, Any], *, on_text: TextCallback | None = None, encoded: bytes | None = None
    ) -> ModelResponse:
        retries_left = self.stream_retries
        pause = self.stream_retry_seconds
        while True:
            attempt = _Attempt()
            try:
                return await self._attempt(body, on_text, attempt, encoded)
            except ProviderError as exc:
                # Only a stream that broke after it began is ours to retry (the SDK retried
                # everything before that already), and only while none of its text was
                # streamed: see the module's docstring.
                ours = attempt.started and exc.kind in ("stream", "idle")
                if not ours or attempt.streamed_text or retries_left <= 0:
                    raise
            retries_left -= 1
            await asyncio.sleep(pause)
            pause *= 2

    async def _attempt(
        self, body: dict[str, Any], on_text: TextCallback | None, attempt: _Attempt, encoded: bytes | None
    ) -> ModelResponse:
        client = anthropic_client(api_key=self.api_key, base_url=self.base_url, max_retries=self.max_retries)
        # The read timeout bounds every wait for bytes, before the headers and between events.
        timeout = anthropic.Timeout(
            self.idle_seconds, connect=min(CONNECT_TIMEOUT_SECONDS, self.idle_seconds)
        )
        started = time.monotonic()
        first_token_ms: int | None = None
        try:
            async with _stream(client, body, encoded, timeout) as stream:
                attempt.started = True
                async for event in stream:
                    self._follow(event, attempt)
                    if event.type == "text" and event.text:
                        if first_token_ms is None:
                            first_token_ms = int((time.monotonic() - started) * 1000)
                        if on_text is not None:
                            attempt.streamed_text = True
                            await on_text(event.text)
                self._check_complete(attempt)
                message = await stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc, attempt) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(f"the model sent nothing for {self.idle_seconds:g} s", kind="idle") from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"cannot reach the model: {exc}", kind="connection") from exc
        except _http.TimeoutException as exc:
            raise ProviderError(
                f"the model's stream sent nothing for {self.idle_seconds:g} s", kind="idle"
            ) from exc
        except _http.TransportError as exc:
            raise ProviderError(f"the model's stream broke off: {type(exc).__name__}", kind="stream") from exc
        except ValueError as exc:
            # The SDK parses partial tool input as it arrives; malformed JSON is a broken stream.
            raise ProviderError(f"the model's stream was malformed: {exc}", kind="stream") from exc
        usage = message.usage
        return ModelResponse(
            content=[block.model_dump(mode="json", exclude_none=True) for block in message.content],
            stop_reason=message.stop_reason or "end_turn",
            usage=Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
                cache_read_input_tokens=usage.cache_read_input_tokens or 0,
            ),
            raw={"id": message.id, "model": message.model, "stop_sequence": message.stop_sequence},
            first_token_ms=first_token_ms,
        )

    @staticmethod
    def _follow(event: Any, attempt: _Attempt) -> None:
        if event.type == "content_block_start":
            attempt.open_blocks.add(event.index)
        elif event.type == "content_block_stop":
            attempt.open_blocks.discard(event.index)
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            attempt.tool_json.setdefault(event.index, []).append(event.delta.partial_json)
        elif event.type == "message_stop":
            attempt.stopped = True

    @staticmethod
    def _check_complete(attempt: _Attempt) -> None:
        """A stream is an answer only once it said so: `message_stop`, every block closed, and
        every tool input a whole JSON object."""
        if not attempt.stopped or attempt.open_blocks:
            raise ProviderError("the model's stream ended before the answer did", kind="stream")
        for pieces in attempt.tool_json.values():
            text = "".join(pieces)
            if not text:
                continue  # a tool without input streams none
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ProviderError("the model's tool input was cut off", kind="stream")

    @staticmethod
    def _status_error(exc: anthropic.APIStatusError, attempt: _Attempt) -> ProviderError:
        if attempt.started:
            # An `error` event inside a stream that had begun.
            error_type = _error_type(exc)
            kind = "stream" if error_type in RETRYABLE_STREAM_ERRORS else "api"
            return ProviderError(f"the model's stream failed: {_error_message(exc)}", kind=kind)
        kind = "prompt_too_long" if _is_prompt_too_long(exc) else "api"
        return ProviderError(f"{exc.status_code}: {_error_message(exc)}", kind=kind, status=exc.status_code)


async def anthropic_max_input_tokens(*, api_key: str, base_url: str | None, model: str) -> int | None:
    """The model's context window from the Models API, or None when it cannot say."""
    # No retries: a session waits for this answer, and the table's default is a fine fallback.
    client = anthropic_client(api_key=api_key, base_url=base_url, max_retries=0)
    try:
        info = await client.models.retrieve(model, timeout=MODELS_API_TIMEOUT_SECONDS)
    except anthropic.APIError:
        return None
    value = getattr(info, "max_input_tokens", None)
    return value if isinstance(value, int) and value > 0 else None


def _error_type(exc: anthropic.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return error["type"]
    return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return exc.message
