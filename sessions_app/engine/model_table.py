"""Context windows of known models (seed 002's table plus current Claude models), and whose they are.

`providers.context_window_resolve` reads it, through the aliases (then the Models API, then the
default); `providers.choice` reads which provider serves a model of the table."""

from __future__ import annotations

DEFAULT_CONTEXT_WINDOW = 128_000

MODEL_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_000_000,
    "gpt-4.1-mini": 1_000_000,
    "claude-sonnet-4-20250514": 200_000,
    "claude-opus-4-20250514": 200_000,
    "claude-3-haiku-20240307": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-1-20250805": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4-5-20250929": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-haiku-4-5-20251001": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-opus-4-5-20251101": 200_000,
    "claude-3-5-haiku-20241022": 200_000,
    "claude-3-7-sonnet-20250219": 200_000,
    "claude-sonnet-4-6": 200_000,
    "claude-opus-4-6": 200_000,
    "scripted": 200_000,
}

# The table's models that OpenAI serves (seed 002's); Anthropic serves every `claude-` model.
OPENAI_MODELS = frozenset({"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini"})
ANTHROPIC_MODEL_PREFIX = "claude-"

# Other names of models of the table. Seed 002's table lists Claude 3 Haiku as
# "claude-haiku-3-20250307", which is no model id (the Models API does not know it); its real id
# is "claude-3-haiku-20240307". A session that names the seed's name gets the real model's window.
MODEL_ALIASES: dict[str, str] = {
    "claude-haiku-3-20250307": "claude-3-haiku-20240307",
}
