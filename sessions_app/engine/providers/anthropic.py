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
import contextlib
import functools
import importlib
import json
import ssl
import time
from collections.abc import Iterator
from typing import Any

import anthropic

from sessions_app.common.model_names import model_name_split
from sessions_app.engine.providers.base import ModelResponse, ProviderError, TextCallback, Usage
from sessions_app.engine.providers.clients import CLIENT_POOLS as CLIENT_POOLS  # the tests read it here
from sessions_app.engine.providers.clients import pooled_client

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


@contextlib.contextmanager
def anthropic_client(
    *, api_key: str, base_url: str | None, max_retries: int = 2
) -> Iterator[anthropic.AsyncAnthropic]:
    """The client for one call (`with anthropic_client(...) as client:`), counted in flight
    until the block ends: the stream read to its end and closed (`clients.pooled_client`)."""

    def make() -> anthropic.AsyncAnthropic:
        # With the SDK's own HTTP client and its defaults, but one TLS context for all of them:
        # otherwise each client loads the CA bundle again, which the first CLIENT_POOLS model
        # calls of a process would pay.
        http_client = anthropic.DefaultAsyncHttpxClient(verify=_tls_context())
        return anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=max_retries, http_client=http_client
        )

    with pooled_client(("anthropic", api_key, base_url, max_retries), make) as client:
        yield client


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The process's TLS context for the model API, as the SDK's HTTP client makes it (the
    system's CA bundle, `SSL_CERT_FILE` and `SSL_CERT_DIR` honoured)."""
    return _http.create_ssl_context()


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


async def _stream(
    client: anthropic.AsyncAnthropic, body: dict[str, Any], encoded: bytes | None, timeout: anthropic.Timeout
) -> anthropic.AsyncStream[Any]:
    """The SDK's stream of the Messages API's events for `body`, each a plain dict. With
    `encoded` (the body's JSON, already built) those bytes are sent as they are: the SDK would
    otherwise copy the whole body and encode it again on every call, a cost that grows with the
    history. The SDK still does the HTTP: its retries before the stream starts, its errors, its
    SSE decoding (an `error` event raises `APIStatusError`); the answer is put together here
    (`_Attempt`), not by the SDK's message stream, which built a model object per event and
    parsed a tool's partial input again at each of its pieces."""
    options: Any = {"headers": {"Content-Type": "application/json"}, "timeout": timeout}
    if encoded is not None and encoded.startswith(b"{") and encoded != b"{}":
        # The engine's bodies ask for the stream themselves (`context.build_request`): their
        # megabytes go out without a copy. Another body gets `"stream": true` put first, with
        # one copy of its bytes.
        streamed = (
            encoded if body.get("stream") is True else b"".join((b'{"stream":true,', memoryview(encoded)[1:]))
        )
        return await client.post(
            "/v1/messages",
            content=streamed,
            options=options,
            cast_to=object,
            stream=True,
            stream_cls=anthropic.AsyncStream[object],
        )
    return await client.post(
        "/v1/messages",
        body={**body, "stream": True},
        options=options,
        cast_to=object,
        stream=True,
        stream_cls=anthropic.AsyncStream[object],
    )


def _is_prompt_too_long(exc: anthropic.APIStatusError) -> bool:
    return exc.status_code in (400, 413) and "prompt is too long" in str(exc).lower()


class _Attempt:
    """What one streamed attempt has done so far, and the answer it puts together from the
    stream's events (what the SDK's message stream accumulated)."""

    def __init__(self) -> None:
        self.streamed_text = False
        self.started = False  # the response's headers arrived: the SDK's retries are over
        self.stopped = False  # message_stop arrived
        self.open_blocks: set[int] = set()
        self.tool_json: dict[int, list[str]] = {}
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, list[str]] = {}

    def follow(self, event: dict[str, Any]) -> str:
        """Take one event in; the text it streams ("" if none)."""
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            index = event["index"]
            self.open_blocks.add(index)
            self.blocks[index] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(event["index"], event.get("delta") or {})
        elif kind == "content_block_stop":
            self.open_blocks.discard(event["index"])
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    self.message[key] = delta[key]
            usage = dict(self.message.get("usage") or {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            self.message["usage"] = usage
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _delta(self, index: int, delta: dict[str, Any]) -> str:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            self.texts.setdefault(index, []).append(text)
            return text
        if kind == "input_json_delta":
            self.tool_json.setdefault(index, []).append(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + (delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return ""

    def content(self) -> list[dict[str, Any]]:
        """The answer's blocks in order, as the API returns them whole (without `null` fields).
        Call after `_check_complete`: every tool input is then a whole JSON object."""
        out = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if index in self.texts:
                block["text"] = block.get("text", "") + "".join(self.texts[index])
            if index in self.tool_json:
                text = "".join(self.tool_json[index])
                block["input"] = json.loads(text) if text else {}
            out.append({key: value for key, value in block.items() if value is not None})
        return out


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
        named, name = model_name_split(str(body.get("model", "")))
        if named is not None:
            # `anthropic/claude-...`: the API is sent the model's own name (a body encoded again).
            body, encoded = {**body, "model": name}, None
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
        with anthropic_client(
            api_key=self.api_key, base_url=self.base_url, max_retries=self.max_retries
        ) as client:
            return await self._attempt_with(client, body, on_text, attempt, encoded)

    async def _attempt_with(
        self,
        client: anthropic.AsyncAnthropic,
        body: dict[str, Any],
        on_text: TextCallback | None,
        attempt: _Attempt,
        encoded: bytes | None,
    ) -> ModelResponse:
        # The read timeout bounds every wait for bytes, before the headers and between events.
        timeout = anthropic.Timeout(
            self.idle_seconds, connect=min(CONNECT_TIMEOUT_SECONDS, self.idle_seconds)
        )
        started = time.monotonic()
        first_token_ms: int | None = None
        try:
            stream = await _stream(client, body, encoded, timeout)
            attempt.started = True
            try:
                async for event in stream:
                    text = attempt.follow(event) if isinstance(event, dict) else ""
                    if text:
                        if first_token_ms is None:
                            first_token_ms = int((time.monotonic() - started) * 1000)
                        if on_text is not None:
                            attempt.streamed_text = True
                            await on_text(text)
            finally:
                await stream.close()
            self._check_complete(attempt)
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
            # An event that is not JSON: a broken stream.
            raise ProviderError(f"the model's stream was malformed: {exc}", kind="stream") from exc
        message = attempt.message
        usage = message.get("usage") or {}
        return ModelResponse(
            content=attempt.content(),
            stop_reason=message.get("stop_reason") or "end_turn",
            usage=Usage(
                input_tokens=usage.get("input_tokens") or 0,
                output_tokens=usage.get("output_tokens") or 0,
                cache_creation_input_tokens=usage.get("cache_creation_input_tokens") or 0,
                cache_read_input_tokens=usage.get("cache_read_input_tokens") or 0,
            ),
            raw={
                "id": message.get("id"),
                "model": message.get("model"),
                "stop_sequence": message.get("stop_sequence"),
            },
            first_token_ms=first_token_ms,
        )

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
    try:
        with anthropic_client(api_key=api_key, base_url=base_url, max_retries=0) as client:
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
