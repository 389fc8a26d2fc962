"""Model providers and the choice between them."""

from __future__ import annotations

from django.conf import settings

from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError, Usage

__all__ = ["ModelResponse", "Provider", "ProviderError", "Usage", "provider_for_model"]

SCRIPTED_MODEL = "scripted"


def provider_for_model(model: str) -> Provider:
    """The scripted model for `model == "scripted"` or when PALIMPSEST_PROVIDER is `scripted`;
    else Anthropic (with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL as given)."""
    if model == SCRIPTED_MODEL or settings.PALIMPSEST_PROVIDER == "scripted":
        from sessions_app.engine.providers.scripted import ScriptedProvider

        return ScriptedProvider(chunk_delay_seconds=settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS)
    from sessions_app.engine.providers.anthropic import AnthropicProvider

    return AnthropicProvider(api_key=settings.ANTHROPIC_API_KEY, base_url=settings.ANTHROPIC_BASE_URL)
