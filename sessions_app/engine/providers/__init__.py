"""Model providers and the choice between them."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.conf import settings

from sessions_app.engine.model_table import DEFAULT_CONTEXT_WINDOW, MODEL_CONTEXT_WINDOWS
from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError, Usage
from sessions_app.validation import MAX_MODEL_CHARS

__all__ = [
    "ModelResponse",
    "Provider",
    "ProviderError",
    "Usage",
    "context_window_resolve",
    "context_window_resolve_sync",
    "provider_for_model",
]

SCRIPTED_MODEL = "scripted"
# Context windows the Models API told this process, per model.
_api_windows: dict[str, int] = {}


def _uses_scripted(model: str) -> bool:
    return model == SCRIPTED_MODEL or settings.PALIMPSEST_PROVIDER == "scripted"


def _window_known(model: str) -> int | None:
    """The window of `model` without asking the Models API: the table's, or an answer (or the
    lack of one) this process remembers; None when only the Models API can tell."""
    if model in MODEL_CONTEXT_WINDOWS:
        return MODEL_CONTEXT_WINDOWS[model]
    if model in _api_windows:
        return _api_windows[model]
    if _uses_scripted(model) or not 0 < len(model) <= MAX_MODEL_CHARS:
        _api_windows[model] = DEFAULT_CONTEXT_WINDOW
        return DEFAULT_CONTEXT_WINDOW
    return None


async def context_window_resolve(model: str) -> int:
    """A session's default window (PROTOCOL.md): the model's entry in the built-in table; for a
    model the table does not know, the Models API's `max_input_tokens` when reachable; else
    128,000. Each answer, or the lack of one, is remembered for the process.

    The one rule for every way a session is created: the agent websocket and the dashboard await
    this; sync code calls `context_window_resolve_sync`, which shares its answers."""
    known = _window_known(model)
    if known is not None:
        return known
    from sessions_app.engine.providers.anthropic import anthropic_max_input_tokens

    value = await anthropic_max_input_tokens(
        api_key=settings.ANTHROPIC_API_KEY, base_url=settings.ANTHROPIC_BASE_URL, model=model
    )
    _api_windows[model] = value or DEFAULT_CONTEXT_WINDOW
    return _api_windows[model]


def context_window_resolve_sync(model: str) -> int:
    """`context_window_resolve` for sync code (never in an event loop's thread). A model the
    process already knows costs nothing; a lookup runs the async resolver, so it blocks the
    calling thread (up to the Models API's timeout): async callers resolve first instead."""
    known = _window_known(model)
    return known if known is not None else async_to_sync(context_window_resolve)(model)


def provider_for_model(model: str) -> Provider:
    """The scripted model for `model == "scripted"` or when PALIMPSEST_PROVIDER is `scripted`;
    else Anthropic (with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL as given)."""
    if _uses_scripted(model):
        from sessions_app.engine.features import features
        from sessions_app.engine.providers.scripted import ScriptedProvider

        return ScriptedProvider(
            rules=features().scripted_rules,
            chunk_delay_seconds=settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS,
        )
    from sessions_app.engine.providers.anthropic import AnthropicProvider

    return AnthropicProvider(api_key=settings.ANTHROPIC_API_KEY, base_url=settings.ANTHROPIC_BASE_URL)
