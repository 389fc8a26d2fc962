"""Which provider answers a model: the one place that decides (DESIGN.md, "Models from more than
one provider").

A model id names its provider (`openai/gpt-4.1`, `anthropic/claude-sonnet-4-6`: the API is sent
the name without it), else the built-in table says whose it is (seed 002's `gpt-*` entries are
OpenAI's, every `claude-*` is Anthropic's), else PALIMPSEST_PROVIDER decides. The scripted model
answers the model `scripted`, and every model while no provider is configured (an offline
server). A paid provider is configured by its key or its base URL, or by PALIMPSEST_PROVIDER
naming it. A new session of a model whose provider is not configured is refused
(`model_unserved`), never answered by another provider instead."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from sessions_app.common.model_names import (
    PREFIXED_PROVIDERS,
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI,
    PROVIDER_SCRIPTED,
    model_name_split,
)
from sessions_app.engine.model_table import ANTHROPIC_MODEL_PREFIX, MODEL_ALIASES, OPENAI_MODELS

SCRIPTED_MODEL = "scripted"
# What configures each paid provider (its settings), for the messages that name them.
PROVIDER_SETTINGS = {
    PROVIDER_ANTHROPIC: ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    PROVIDER_OPENAI: ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
}


@dataclass(frozen=True)
class ModelChoice:
    provider: str  # anthropic, openai or scripted
    api_model: str  # the model's name as its provider's API knows it (without a provider prefix)


def providers_configured() -> frozenset[str]:
    """The paid providers this server may call: each whose key or base URL is set, and the one
    PALIMPSEST_PROVIDER names."""
    configured = {
        provider
        for provider, names in PROVIDER_SETTINGS.items()
        if any(getattr(settings, name, None) for name in names)
    }
    if settings.PALIMPSEST_PROVIDER in PREFIXED_PROVIDERS:
        configured.add(settings.PALIMPSEST_PROVIDER)
    return frozenset(configured)


def table_provider(name: str) -> str | None:
    """Whose model of the built-in table `name` is (through its aliases), or None."""
    name = MODEL_ALIASES.get(name, name)
    if name in OPENAI_MODELS:
        return PROVIDER_OPENAI
    if name.startswith(ANTHROPIC_MODEL_PREFIX):
        return PROVIDER_ANTHROPIC
    return None


def model_choice(model: str) -> ModelChoice:
    """The provider that answers a session of `model` here, and the name its API is sent."""
    if model == SCRIPTED_MODEL or not providers_configured():
        return ModelChoice(PROVIDER_SCRIPTED, model)
    named, name = model_name_split(model)
    provider = named or table_provider(name) or settings.PALIMPSEST_PROVIDER
    return ModelChoice(provider, name)


def provider_name_for_model(model: str) -> str:
    """The provider that answers a session of `model` on this server: the session's public state
    says it (PROTOCOL.md v1.2), and the dashboard shows no cost for the scripted model."""
    return model_choice(model).provider


def model_unserved(model: str) -> str | None:
    """Why no provider configured here answers `model` (`session.create`'s `invalid_value`), or
    None when one does."""
    choice = model_choice(model)
    if choice.provider == PROVIDER_SCRIPTED:
        return None
    if not choice.api_model:
        return f"model {model!r} names its provider but no model after the '/'"
    if choice.provider not in providers_configured():
        key, base_url = PROVIDER_SETTINGS[choice.provider]
        others = sorted(providers_configured())
        return (
            f"model {model!r} is answered by the {choice.provider} provider, which this server has not "
            f"configured (no {key} and no {base_url}); its configured providers are "
            f"{', '.join(others)} (name one as a prefix, e.g. '{others[0]}/MODEL'), or use the model "
            f"'{SCRIPTED_MODEL}'"
        )
    return None


def default_model() -> str:
    """The model of a session that names none: the scripted model when it answers by default (no
    provider configured, or PALIMPSEST_PROVIDER is `scripted`), else PALIMPSEST_DEFAULT_MODEL."""
    if settings.PALIMPSEST_PROVIDER == PROVIDER_SCRIPTED or not providers_configured():
        return SCRIPTED_MODEL
    return str(settings.PALIMPSEST_DEFAULT_MODEL)
