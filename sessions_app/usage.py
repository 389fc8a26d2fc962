"""What a session's model calls used, and what that is estimated to cost.

The session keeps running totals of its calls' usage (`AgentSession.usage_*`, added by
`services.model_call_record` in the transaction that records the call), so reading them costs
nothing however long the session. Costs are estimates from `settings.PALIMPSEST_MODEL_PRICES`
(USD per million tokens of each kind); a model without a price has tokens and no cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Case, F, FloatField, Value, When
from django.db.models.expressions import Combinable

from sessions_app.common.model_names import model_name_split
from sessions_app.models import AgentSession

TOKENS_PER_PRICE_UNIT = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens: uncached input, output, cache writes, cache reads."""

    input: float
    output: float
    cache_write: float
    cache_read: float


def model_price(model: str) -> ModelPrice | None:
    """The price of `model` from the setting (under its own id, else under the name its provider
    prefix names: `openai/gpt-4.1` costs what `gpt-4.1` does), or None when it has none."""
    prices = settings.PALIMPSEST_MODEL_PRICES
    entry = prices.get(model) or prices.get(model_name_split(model)[1])
    if entry is None:
        return None
    return ModelPrice(
        input=entry["input"],
        output=entry["output"],
        cache_write=entry["cache_write"],
        cache_read=entry["cache_read"],
    )


@dataclass(frozen=True)
class UsageTotals:
    model_calls: int = 0
    input_tokens: int = 0  # uncached input
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every token sent: uncached, written to the cache and read from it."""
        return self.input_tokens + self.cache_creation_tokens + self.cache_read_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def cache_hit_share(self) -> float | None:
        """The share of prompt tokens read from the cache (None before any prompt)."""
        return self.cache_read_tokens / self.prompt_tokens if self.prompt_tokens else None

    def cost(self, price: ModelPrice | None) -> float | None:
        """The estimated cost in USD, or None without a price."""
        if price is None:
            return None
        return (
            self.input_tokens * price.input
            + self.output_tokens * price.output
            + self.cache_creation_tokens * price.cache_write
            + self.cache_read_tokens * price.cache_read
        ) / TOKENS_PER_PRICE_UNIT


@dataclass(frozen=True)
class SessionUsage:
    model: str
    totals: UsageTotals
    price: ModelPrice | None
    # The provider that answers the session on this server: the scripted model costs nothing,
    # whatever model the session names.
    provider: str = ""

    @property
    def cost(self) -> float | None:
        return self.totals.cost(self.price)


def usage_totals_of(session: AgentSession) -> UsageTotals:
    return UsageTotals(
        model_calls=session.usage_model_calls,
        input_tokens=session.usage_input_tokens,
        output_tokens=session.usage_output_tokens,
        cache_creation_tokens=session.usage_cache_creation_tokens,
        cache_read_tokens=session.usage_cache_read_tokens,
    )


SCRIPTED_PROVIDER = "scripted"


def session_usage(session: AgentSession, *, provider: str) -> SessionUsage:
    """The session's usage and its estimated cost (every call of a session uses its model).
    `provider` is the one answering the session here (`engine.providers.provider_name_for_model`):
    a session answered by the scripted model has no price, whatever model it names."""
    price = None if provider == SCRIPTED_PROVIDER else model_price(session.model)
    return SessionUsage(model=session.model, totals=usage_totals_of(session), price=price, provider=provider)


def total_tokens_expression() -> Combinable:
    """A session's total tokens, as an ORM expression (for sorting the list)."""
    return (
        F("usage_input_tokens")
        + F("usage_output_tokens")
        + F("usage_cache_creation_tokens")
        + F("usage_cache_read_tokens")
    )


def cost_expression(*, priced: Iterable[str]) -> Case:
    """A session's estimated cost in USD as an ORM expression: NULL for a model without a price
    or not in `priced` (the models a paid provider answers here; for sorting the list the way
    `SessionUsage.cost` computes it)."""
    by_price: dict[ModelPrice, list[str]] = {}
    for model in priced:
        price = model_price(model)
        if price is None:
            continue
        by_price.setdefault(price, []).append(model)
    whens = [
        When(
            model__in=models,
            then=(
                F("usage_input_tokens") * Value(price.input)
                + F("usage_output_tokens") * Value(price.output)
                + F("usage_cache_creation_tokens") * Value(price.cache_write)
                + F("usage_cache_read_tokens") * Value(price.cache_read)
            )
            / Value(float(TOKENS_PER_PRICE_UNIT)),
        )
        for price, models in by_price.items()
    ]
    return Case(*whens, default=None, output_field=FloatField())
