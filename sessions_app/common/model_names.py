"""A model id may name its provider before a slash (DESIGN.md, "Models from more than one
provider"): `openai/gpt-4.1`, `anthropic/claude-sonnet-4-6`. Only these provider names count: a
compatible server's own ids may hold slashes (`meta-llama/Llama-3.1-8B`), which are the model's."""

from __future__ import annotations

PROVIDER_ANTHROPIC = "anthropic"
PROVIDER_OPENAI = "openai"
PROVIDER_SCRIPTED = "scripted"
# The providers a model id may name, and the paid ones PALIMPSEST_PROVIDER may name besides `scripted`.
PREFIXED_PROVIDERS = (PROVIDER_ANTHROPIC, PROVIDER_OPENAI)


def model_name_split(model: str) -> tuple[str | None, str]:
    """(the provider the id names, or None; the model's name as its provider's API knows it)."""
    head, slash, rest = model.partition("/")
    if slash and head in PREFIXED_PROVIDERS:
        return head, rest
    return None, model
