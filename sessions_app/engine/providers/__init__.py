"""Model providers and the choice between them."""

from __future__ import annotations

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
    "provider_for_model",
]

SCRIPTED_MODEL = "scripted"
# Context windows the Models API told this process, per model.
_api_windows: dict[str, int] = {}


def _uses_scripted(model: str) -> bool:
    return model == SCRIPTED_MODEL or settings.PALIMPSEST_PROVIDER == "scripted"


async def context_window_resolve(model: str) -> int:
    """A session's default window (PROTOCOL.md): the model's entry in the built-in table; for a
    model the table does not know, the Models API's `max_input_tokens` when reachable; else
    128,000. Each answer, or the lack of one, is remembered for the process."""
    if model in MODEL_CONTEXT_WINDOWS:
        return MODEL_CONTEXT_WINDOWS[model]
    if model in _api_windows:
        return _api_windows[model]
    value = None
    if not _uses_scripted(model) and 0 < len(model) <= MAX_MODEL_CHARS:
        from sessions_app.engine.providers.anthropic import anthropic_max_input_tokens

        value = await anthropic_max_input_tokens(
            api_key=settings.ANTHROPIC_API_KEY, base_url=settings.ANTHROPIC_BASE_URL, model=model
        )
    _api_windows[model] = value or DEFAULT_CONTEXT_WINDOW
    return _api_windows[model]


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
