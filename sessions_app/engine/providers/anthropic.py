"""The Anthropic provider: `AsyncAnthropic`, streaming, with the SDK's own retries."""

from __future__ import annotations

import time
import weakref
from typing import Any

import anthropic

from sessions_app.engine.providers.base import ModelResponse, ProviderError, TextCallback, Usage

# One client per event loop (in the server: one per process). Building a client costs tens of
# milliseconds and it pools connections, so turns share it; an httpx pool cannot cross loops.
_clients: weakref.WeakKeyDictionary[Any, dict[tuple, anthropic.AsyncAnthropic]] = weakref.WeakKeyDictionary()


def anthropic_client(*, api_key: str, base_url: str | None, max_retries: int = 2) -> anthropic.AsyncAnthropic:
    import asyncio

    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    key = (api_key, base_url, max_retries)
    client = per_loop.get(key)
    if client is None:
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries)
        per_loop[key] = client
    return client


MODELS_API_TIMEOUT_SECONDS = 5.0


def _is_prompt_too_long(exc: anthropic.APIStatusError) -> bool:
    return exc.status_code in (400, 413) and "prompt is too long" in str(exc).lower()


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, *, api_key: str, base_url: str | None, max_retries: int = 2) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.max_retries = max_retries

    async def complete(self, body: dict[str, Any], *, on_text: TextCallback | None = None) -> ModelResponse:
        client = anthropic_client(api_key=self.api_key, base_url=self.base_url, max_retries=self.max_retries)
        started = time.monotonic()
        first_token_ms: int | None = None
        try:
            async with client.messages.stream(**body) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        if first_token_ms is None:
                            first_token_ms = int((time.monotonic() - started) * 1000)
                        if on_text is not None:
                            await on_text(event.text)
                message = await stream.get_final_message()
        except anthropic.APIStatusError as exc:
            kind = "prompt_too_long" if _is_prompt_too_long(exc) else "api"
            raise ProviderError(
                f"{exc.status_code}: {_error_message(exc)}", kind=kind, status=exc.status_code
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"cannot reach the model: {exc}", kind="connection") from exc
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


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return exc.message
