"""Model providers and the choice between them."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import async_to_sync
from django.conf import settings

from sessions_app.common.caches import LRUCache
from sessions_app.common.model_names import (
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI,
    PROVIDER_SCRIPTED,
    model_name_split,
)
from sessions_app.engine.contract import ScriptedRule
from sessions_app.engine.model_table import DEFAULT_CONTEXT_WINDOW, MODEL_ALIASES, MODEL_CONTEXT_WINDOWS
from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError, Usage
from sessions_app.engine.providers.choice import (
    SCRIPTED_MODEL,
    default_model,
    model_choice,
    model_unserved,
    provider_name_for_model,
    providers_configured,
    table_provider,
)
from sessions_app.engine.providers.scripted import ScriptedProvider
from sessions_app.validation import MAX_MODEL_CHARS

__all__ = [
    "ModelResponse",
    "Provider",
    "ProviderError",
    "Usage",
    "context_window_resolve",
    "context_window_resolve_sync",
    "default_model",
    "model_choice",
    "model_unserved",
    "models_offered",
    "models_priced",
    "provider_for_model",
    "provider_name_for_model",
]

# Context windows the Models API told this process, per model. Clients name models, so the
# cache is bounded: a model pushed out is simply asked about again.
MODEL_WINDOW_CACHE_SIZE = 256
_api_windows: LRUCache[str, int] = LRUCache(MODEL_WINDOW_CACHE_SIZE)


def models_offered() -> list[str]:
    """The models of the built-in table that a provider configured here serves, for a new
    session's picker, then the scripted model (only it while no provider is configured)."""
    configured = providers_configured()
    if not configured:
        return [SCRIPTED_MODEL]
    served = [m for m in MODEL_CONTEXT_WINDOWS if table_provider(m) in configured]
    return [*sorted(served), SCRIPTED_MODEL]


def models_priced() -> list[str]:
    """The models with a price (PALIMPSEST_MODEL_PRICES) that a paid provider answers here, under
    their own names and with their provider's prefix: a session the scripted model answers costs
    nothing, whatever model it names."""
    priced = []
    for model in settings.PALIMPSEST_MODEL_PRICES:
        provider = provider_name_for_model(model)
        if provider == PROVIDER_SCRIPTED:
            continue
        priced.append(model)
        if model_name_split(model)[0] is None:
            priced.append(f"{provider}/{model}")
    return priced


def _window_known(model: str) -> int | None:
    """The window of `model` without asking the Models API: the table's (under its name, without
    a provider prefix, or an alias, `MODEL_ALIASES`), or an answer (or the lack of one) this
    process remembers (the last MODEL_WINDOW_CACHE_SIZE models); None when only Anthropic's
    Models API can tell. A name no session may have (empty, or over MAX_MODEL_CHARS) is neither
    looked up nor remembered: callers validate first (PROTOCOL.md v1.1). Only Anthropic's models
    are asked about: the other providers' unknown models get the default."""
    name = model_name_split(model)[1]
    known = MODEL_CONTEXT_WINDOWS.get(MODEL_ALIASES.get(name, name))
    if known is not None:
        return known
    if not 0 < len(model) <= MAX_MODEL_CHARS or provider_name_for_model(model) != PROVIDER_ANTHROPIC:
        return DEFAULT_CONTEXT_WINDOW
    return _api_windows.get(model)


async def context_window_resolve(model: str) -> int:
    """A session's default window (PROTOCOL.md): the model's entry in the built-in table; for an
    Anthropic model the table does not know, the Models API's `max_input_tokens` when reachable;
    else 128,000.

    The one rule for every way a session is created: the agent websocket and the dashboard await
    this; sync code calls `context_window_resolve_sync`, which shares its answers."""
    known = _window_known(model)
    if known is not None:
        return known
    from sessions_app.engine.providers.anthropic import anthropic_max_input_tokens

    value = await anthropic_max_input_tokens(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL,
        model=model_choice(model).api_model,
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
    """The provider `model_choice` names for `model`: the scripted model (with the features'
    `scripted_rules` and `context_openings`), Anthropic (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)
    or OpenAI's Chat Completions (OPENAI_API_KEY, OPENAI_BASE_URL), each paid one with the
    model-stream limits PALIMPSEST_MODEL_IDLE_SECONDS and PALIMPSEST_MODEL_STREAM_RETRY_SECONDS.
    A paid provider's SDK is imported on first use."""
    provider = provider_name_for_model(model)
    if provider == PROVIDER_SCRIPTED:
        return ScriptedProvider(
            rules=scripted_rules,
            context_openings=context_openings,
            chunk_delay_seconds=settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS,
        )
    if provider == PROVIDER_OPENAI:
        from sessions_app.engine.providers.openai import OpenAIProvider

        return OpenAIProvider(
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            idle_seconds=settings.PALIMPSEST_MODEL_IDLE_SECONDS,
            stream_retry_seconds=settings.PALIMPSEST_MODEL_STREAM_RETRY_SECONDS,
            stream=settings.PALIMPSEST_OPENAI_STREAM,
        )
    from sessions_app.engine.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL,
        idle_seconds=settings.PALIMPSEST_MODEL_IDLE_SECONDS,
        stream_retry_seconds=settings.PALIMPSEST_MODEL_STREAM_RETRY_SECONDS,
    )
