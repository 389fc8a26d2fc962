"""What the engine needs from a model: one streamed completion of an Anthropic-format request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TextCallback = Callable[[str], Awaitable[None]]


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass
class ModelResponse:
    content: list[dict]
    stop_reason: str
    usage: Usage
    raw: dict[str, Any] = field(default_factory=dict)
    first_token_ms: int | None = None


# Failures that asking again may cure: the service was busy or the answer did not arrive whole.
RETRYABLE_KINDS = frozenset({"connection", "stream", "idle"})
RETRYABLE_STATUS_MIN = 500
STATUS_TOO_MANY_REQUESTS = 429


class ProviderError(Exception):
    """The model call failed after the provider's own retries.

    `kind` is `prompt_too_long` (the request exceeds the model's window), `api` (an error status),
    `connection` (the model could not be reached), `stream` (the answer's stream broke off or
    ended without its end: a truncated answer is never returned) or `idle` (the stream sent
    nothing for `PALIMPSEST_MODEL_IDLE_SECONDS`).
    """

    def __init__(self, message: str, *, kind: str = "api", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status

    @property
    def retryable(self) -> bool:
        """Whether the same request might succeed if sent again (a 5xx, a 429, a broken stream)."""
        if self.kind in RETRYABLE_KINDS:
            return True
        return self.status is not None and (
            self.status >= RETRYABLE_STATUS_MIN or self.status == STATUS_TOO_MANY_REQUESTS
        )


class Provider(Protocol):
    name: str

    async def complete(
        self, body: dict[str, Any], *, on_text: TextCallback | None = None, encoded: bytes | None = None
    ) -> ModelResponse:
        """Send `body` (Anthropic Messages format, without `stream`) and stream text to `on_text`.
        `encoded`, when given, is `body`'s JSON (`context.canonical_json(body)`), which a provider
        may send as it is instead of encoding `body` again.

        Text given to `on_text` is final for this call: a provider never takes it back. If the
        answer fails after some text was given, the call raises `ProviderError` (the text
        streamed so far was a preview of an answer that never came whole).
        """
        ...
