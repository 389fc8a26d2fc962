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


class ProviderError(Exception):
    """The model call failed after the provider's own retries.

    `kind` is `prompt_too_long` (the request exceeds the model's window), `api` (an error status)
    or `connection`.
    """

    def __init__(self, message: str, *, kind: str = "api", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class Provider(Protocol):
    name: str

    async def complete(self, body: dict[str, Any], *, on_text: TextCallback | None = None) -> ModelResponse:
        """Send `body` (Anthropic Messages format, without `stream`) and stream text to `on_text`."""
        ...
