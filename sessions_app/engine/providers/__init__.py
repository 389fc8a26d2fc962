"""Model providers and the choice between them."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import async_to_sync
from django.conf import settings

from sessions_app.common.caches import LRUCache
from sessions_app.engine.contract import ScriptedRule
from sessions_app.engine.model_table import DEFAULT_CONTEXT_WINDOW, MODEL_ALIASES, MODEL_CONTEXT_WINDOWS
from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError, Usage
from sessions_app.engine.providers.scripted import ScriptedProvider
from sessions_app.validation import MAX_MODEL_CHARS

__all__ = [
    "ModelResponse",
    "Provider",
    "ProviderError",
    "Usage",
    "context_window_resolve",
    "context_window_resolve_sync",
    "models_offered",
    "models_priced",
    "provider_for_model",
    "provider_name_for_model",
]

SCRIPTED_MODEL = "scripted"
# Context windows the Models API told this process, per model. Clients name models, so the
# cache is bounded: a model pushed out is simply asked about again.
MODEL_WINDOW_CACHE_SIZE = 256
_api_windows: LRUCache[str, int] = LRUCache(MODEL_WINDOW_CACHE_SIZE)


def _uses_scripted(model: str) -> bool:
    return model == SCRIPTED_MODEL or settings.PALIMPSEST_PROVIDER == "scripted"


# The models the Anthropic provider serves: Claude's.
ANTHROPIC_MODEL_PREFIX = "claude-"


def provider_name_for_model(model: str) -> str:
    """The provider that answers a session of `model` on this server (`provider_for_model`'s):
    the session's public state says it (PROTOCOL.md v1.2)."""
    return SCRIPTED_MODEL if _uses_scripted(model) else "anthropic"


def models_offered() -> list[str]:
    """The models of the built-in table that a provider configured here serves, for a new
    session's picker: only the scripted model when the scripted provider answers every model;
    else Claude's and the scripted model (no provider serves the table's other models yet)."""
    if settings.PALIMPSEST_PROVIDER == "scripted":
        return [SCRIPTED_MODEL]
    return [*sorted(m for m in MODEL_CONTEXT_WINDOWS if m.startswith(ANTHROPIC_MODEL_PREFIX)), SCRIPTED_MODEL]


def models_priced() -> list[str]:
    """The models with a price (PALIMPSEST_MODEL_PRICES) that a paid provider answers here: a
    session the scripted model answers costs nothing, whatever model it names."""
    return [m for m in settings.PALIMPSEST_MODEL_PRICES if not _uses_scripted(m)]


def _window_known(model: str) -> int | None:
    """The window of `model` without asking the Models API: the table's (under its name or an
    alias, `MODEL_ALIASES`), or an answer (or the lack of one) this process remembers (the last
    MODEL_WINDOW_CACHE_SIZE models); None when only the Models API can tell. A name no session
    may have (empty, or over MAX_MODEL_CHARS) is neither looked up nor remembered: callers
    validate first (PROTOCOL.md v1.1)."""
    known = MODEL_CONTEXT_WINDOWS.get(MODEL_ALIASES.get(model, model))
    if known is not None:
        return known
    if not 0 < len(model) <= MAX_MODEL_CHARS or _uses_scripted(model):
        return DEFAULT_CONTEXT_WINDOW
    return _api_windows.get(model)


async def context_window_resolve(model: str) -> int:
    """A session's default window (PROTOCOL.md): the model's entry in the built-in table; for a
    model the table does not know, the Models API's `max_input_tokens` when reachable; else
    128,000.

    The one rule for every way a session is created: the agent websocket and the dashboard await
    this; sync code calls `context_window_resolve_sync`, which shares its answers."""
    known = _window_known(model)
    if known is not None:
        return known
    from sessions_app.engine.providers.anthropic import anthropic_max_input_tokens

    value = await anthropic_max_input_tokens(
        api_key=settings.ANTHROPIC_API_KEY, base_url=settings.ANTHROPIC_BASE_URL, model=model
    )
    window = value or DEFAULT_CONTEXT_WINDOW
    _api_windows.set(model, window)
    return window


def context_window_resolve_sync(model: str) -> int:
    """`context_window_resolve` for sync code (never in an event loop's thread). A model the
    process already knows costs nothing; a lookup runs the async resolver, so it blocks the
    calling thread (up to the Models API's timeout): async callers resolve first instead."""
    known = _window_known(model)
    return known if known is not None else async_to_sync(context_window_resolve)(model)


def provider_for_model(
    model: str, *, scripted_rules: Sequence[ScriptedRule] = (), context_openings: Sequence[str] = ()
) -> Provider:
    """The scripted model for `model == "scripted"` or when PALIMPSEST_PROVIDER is `scripted`
    (with the features' `scripted_rules` and `context_openings`); else Anthropic (with ANTHROPIC_API_KEY and
    ANTHROPIC_BASE_URL as given, and the model-stream limits PALIMPSEST_MODEL_IDLE_SECONDS and
    PALIMPSEST_MODEL_STREAM_RETRY_SECONDS). The SDK is imported on first use."""
    if _uses_scripted(model):
        return ScriptedProvider(
            rules=scripted_rules,
            context_openings=context_openings,
            chunk_delay_seconds=settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS,
        )
    from sessions_app.engine.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL,
        idle_seconds=settings.PALIMPSEST_MODEL_IDLE_SECONDS,
        stream_retry_seconds=settings.PALIMPSEST_MODEL_STREAM_RETRY_SECONDS,
    )
