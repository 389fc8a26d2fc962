"""A session's usage totals and estimated cost (`sessions_app.usage`): the running totals that
`services.model_call_record` keeps, their backfill, and the price table."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Sum

from config.settings import _model_prices_from_env
from sessions_app.engine.providers import models_priced, provider_name_for_model
from sessions_app.models import AgentSession, ModelCall
from sessions_app.usage import UsageTotals, cost_expression, model_price, session_usage
from tests.dashboard.conftest import chat, session_new
from tests.fake_anthropic import error, text

PRICES = {
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1},
}


def totals_of(session: AgentSession) -> UsageTotals:
    session.refresh_from_db()
    return session_usage(session, provider=provider_name_for_model(session.model)).totals


def calls_summed(session: AgentSession) -> UsageTotals:
    row = ModelCall.objects.filter(session=session).aggregate(
        calls=Count("id"),
        input=Sum("input_tokens"),
        output=Sum("output_tokens"),
        creation=Sum("cache_creation_input_tokens"),
        read=Sum("cache_read_input_tokens"),
    )
    return UsageTotals(
        model_calls=row["calls"],
        input_tokens=row["input"] or 0,
        output_tokens=row["output"] or 0,
        cache_creation_tokens=row["creation"] or 0,
        cache_read_tokens=row["read"] or 0,
    )


def usage_set(session: AgentSession, **counts: int) -> AgentSession:
    AgentSession.objects.filter(pk=session.pk).update(**counts)
    session.refresh_from_db()
    return session


# ---------------------------------------------------------------------------
# The running totals
# ---------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_each_model_call_adds_its_usage_to_the_sessions_totals(fake_anthropic):
    fake_anthropic.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "first question")
    chat(session.pk, "second question, with the first one cached")
    totals = totals_of(session)
    sent = [request.usage for request in fake_anthropic.requests]
    assert totals.model_calls == len(sent) == 2
    assert totals.input_tokens == sum(u["input_tokens"] for u in sent)
    assert totals.output_tokens == sum(u["output_tokens"] for u in sent)
    assert totals.cache_creation_tokens == sum(u["cache_creation_input_tokens"] for u in sent) > 0
    assert totals.cache_read_tokens == sum(u["cache_read_input_tokens"] for u in sent) > 0
    assert totals == calls_summed(session)


@pytest.mark.django_db(transaction=True)
def test_summary_calls_count_too():
    session = session_new(context_window=4000, compact_threshold=0.5)
    for index in range(6):
        chat(session.pk, f"message {index} " + "filler words " * 40)
    assert ModelCall.objects.filter(session=session).exclude(purpose="turn").exists()
    assert totals_of(session) == calls_summed(session)


@pytest.mark.django_db(transaction=True)
def test_a_failed_call_counts_as_a_call(fake_anthropic):
    fake_anthropic.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "first question")
    fake_anthropic.enqueue(error(400, "invalid_request_error", "this request is refused"))
    chat(session.pk, "second question")
    failed = ModelCall.objects.get(session=session, error__contains="this request is refused")
    assert failed.input_tokens == failed.output_tokens == 0
    totals = totals_of(session)
    assert totals.model_calls == 2 and totals == calls_summed(session)


@pytest.mark.django_db
def test_the_migration_fills_the_totals_of_calls_recorded_before_it():
    migration = __import__("sessions_app.migrations.0006_session_usage_totals", fromlist=["x"])
    session = session_new()
    other = session_new()
    for input_tokens, read in ((100, 0), (20, 90)):
        ModelCall.objects.create(
            session=session,
            provider="anthropic",
            model=session.model,
            request={},
            request_sha256="",
            input_tokens=input_tokens,
            output_tokens=7,
            cache_creation_input_tokens=5,
            cache_read_input_tokens=read,
        )
    migration.usage_totals_backfill(apps, None)
    assert totals_of(session) == UsageTotals(
        model_calls=2, input_tokens=120, output_tokens=14, cache_creation_tokens=10, cache_read_tokens=90
    )
    assert totals_of(other) == UsageTotals()


# ---------------------------------------------------------------------------
# Prices
# ---------------------------------------------------------------------------
def test_cost_is_each_kind_of_token_at_its_price_per_million(settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    totals = UsageTotals(
        input_tokens=1_000_000,
        output_tokens=200_000,
        cache_creation_tokens=400_000,
        cache_read_tokens=2_000_000,
    )
    assert totals.cost(model_price("claude-sonnet-4-6")) == pytest.approx(3.0 + 3.0 + 1.5 + 0.6)


def test_a_model_without_a_price_has_tokens_and_no_cost(settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    assert model_price("scripted") is None
    assert UsageTotals(input_tokens=5).cost(None) is None


def test_cache_hit_share_is_cache_reads_over_prompt_tokens():
    totals = UsageTotals(input_tokens=100, cache_creation_tokens=100, cache_read_tokens=600, output_tokens=50)
    assert totals.cache_hit_share == pytest.approx(0.75)
    assert UsageTotals().cache_hit_share is None


def test_every_claude_model_of_the_context_window_table_has_a_price():
    from django.conf import settings

    from sessions_app.engine.model_table import MODEL_CONTEXT_WINDOWS

    claude = {model for model in MODEL_CONTEXT_WINDOWS if model.startswith("claude")}
    assert claude - set(settings.PALIMPSEST_MODEL_PRICES) == set()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "must be an object"),
        ('{"m": {"input": 1, "output": 2}}', "must give exactly input, output, cache_write, cache_read"),
        ('{"m": {"input": -1, "output": 2, "cache_write": 1, "cache_read": 1}}', "must be a number >= 0"),
        ('{"m": {"input": "1", "output": 2, "cache_write": 1, "cache_read": 1}}', "must be a number >= 0"),
    ],
)
def test_a_bad_price_table_in_the_environment_stops_the_start(raw, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        _model_prices_from_env(raw)


def test_prices_from_the_environment_add_models():
    given = '{"my-model": {"input": 1, "output": 2, "cache_write": 1.5, "cache_read": 0.1}}'
    assert _model_prices_from_env(given) == {
        "my-model": {"input": 1.0, "output": 2.0, "cache_write": 1.5, "cache_read": 0.1}
    }


@pytest.mark.django_db
def test_the_lists_cost_expression_agrees_with_the_panels_cost(settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    counts = {
        "usage_input_tokens": 12_345,
        "usage_output_tokens": 678,
        "usage_cache_creation_tokens": 9_000,
        "usage_cache_read_tokens": 40_000,
    }
    for model in ("claude-sonnet-4-6", "claude-haiku-4-5", "scripted"):
        session = usage_set(session_new(model=model), **counts)
        expected = session_usage(session, provider=provider_name_for_model(model)).cost
        in_sql = (
            AgentSession.objects.annotate(cost=cost_expression(priced=models_priced()))
            .get(pk=session.pk)
            .cost
        )
        assert in_sql == (None if expected is None else pytest.approx(expected))


@pytest.mark.django_db
def test_a_session_the_scripted_model_answers_has_no_cost_whatever_model_it_names(settings, client):
    """Without a key the scripted model answers every session: a session named after a priced
    Claude model shows no cost, on its page and in the list (issue 30 item 15)."""
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "scripted"
    counts = {"usage_input_tokens": 1_000_000, "usage_output_tokens": 1_000_000}
    session = usage_set(session_new(model="claude-sonnet-4-6"), **counts)
    usage = session_usage(session, provider=provider_name_for_model(session.model))
    assert (usage.provider, usage.price, usage.cost) == ("scripted", None, None)
    assert models_priced() == []
    in_sql = AgentSession.objects.annotate(cost=cost_expression(priced=models_priced())).get(pk=session.pk)
    assert in_sql.cost is None
    settings.PALIMPSEST_PROVIDER = "anthropic"
    assert session_usage(session, provider=provider_name_for_model(session.model)).cost == pytest.approx(18.0)
    # Under their own names and named with their provider (`anthropic/claude-...`).
    assert set(models_priced()) == set(PRICES) | {f"anthropic/{m}" for m in PRICES}
