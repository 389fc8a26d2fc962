"""Which provider answers a model (DESIGN.md, "Models from more than one provider")."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine.providers import (
    default_model,
    model_choice,
    model_unserved,
    models_offered,
    models_priced,
    provider_for_model,
    provider_name_for_model,
)
from sessions_app.engine.providers.choice import providers_configured
from sessions_app.engine.providers.openai import OpenAIProvider
from sessions_app.models import AgentSession
from sessions_app.usage import model_price
from tests.conftest import chat
from tests.fake_anthropic import FakeAnthropicServer, text
from tests.fake_openai import FakeOpenAIServer


@pytest.fixture
def nothing_configured(settings: Any) -> Any:
    settings.PALIMPSEST_PROVIDER = "scripted"
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "", None
    settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "", None
    return settings


@pytest.fixture
def both_configured(nothing_configured: Any) -> Any:
    nothing_configured.ANTHROPIC_API_KEY = "a-key"
    nothing_configured.OPENAI_API_KEY = "o-key"
    return nothing_configured


def test_with_no_provider_configured_the_scripted_model_answers_every_model(nothing_configured):
    assert providers_configured() == frozenset()
    for model in ("claude-sonnet-4-6", "gpt-4.1", "openai/gpt-4o", "my-local-model", "scripted"):
        assert provider_name_for_model(model) == "scripted"
        assert model_unserved(model) is None
    assert default_model() == "scripted"
    assert models_offered() == ["scripted"]


def test_a_provider_prefix_wins_and_is_not_part_of_the_api_name(both_configured):
    choice = model_choice("openai/claude-lookalike")
    assert (choice.provider, choice.api_model) == ("openai", "claude-lookalike")
    choice = model_choice("anthropic/claude-opus-4-6")
    assert (choice.provider, choice.api_model) == ("anthropic", "claude-opus-4-6")


def test_a_slash_that_names_no_provider_belongs_to_the_model(both_configured):
    both_configured.PALIMPSEST_PROVIDER = "openai"
    choice = model_choice("meta-llama/Llama-3.1-8B")
    assert (choice.provider, choice.api_model) == ("openai", "meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai"),
        ("gpt-4o-mini", "openai"),
        ("gpt-4.1", "openai"),
        ("gpt-4.1-mini", "openai"),
        ("claude-sonnet-4-6", "anthropic"),
        ("claude-anything-new", "anthropic"),
        ("claude-haiku-3-20250307", "anthropic"),
    ],
)
def test_the_built_in_table_says_whose_model_it_is(both_configured, model, provider):
    assert provider_name_for_model(model) == provider


@pytest.mark.parametrize("fallback", ["anthropic", "openai", "scripted"])
def test_an_unknown_model_goes_to_palimpsest_provider(both_configured, fallback):
    both_configured.PALIMPSEST_PROVIDER = fallback
    assert provider_name_for_model("some-local-model") == fallback


def test_the_model_scripted_is_scripted_whatever_is_configured(both_configured):
    assert provider_name_for_model("scripted") == "scripted"
    assert provider_for_model("scripted").name == "scripted"


def test_a_provider_is_configured_by_its_key_its_base_url_or_by_being_named(nothing_configured):
    nothing_configured.OPENAI_BASE_URL = "http://127.0.0.1:8080/v1"
    assert providers_configured() == {"openai"}
    nothing_configured.OPENAI_BASE_URL = None
    nothing_configured.PALIMPSEST_PROVIDER = "anthropic"
    assert providers_configured() == {"anthropic"}


def test_a_model_of_an_unconfigured_provider_is_unserved_with_a_message_that_says_what_to_do(
    nothing_configured,
):
    nothing_configured.OPENAI_API_KEY = "o-key"
    nothing_configured.PALIMPSEST_PROVIDER = "openai"
    problem = model_unserved("claude-sonnet-4-6")
    assert problem is not None
    assert "anthropic" in problem and "ANTHROPIC_API_KEY" in problem and "openai/" in problem
    assert model_unserved("anthropic/claude-sonnet-4-6") is not None
    assert model_unserved("gpt-4.1") is None
    assert model_unserved("openai/") is not None  # a prefix without a model


def test_the_providers_are_the_sdk_ones_with_their_settings(both_configured):
    both_configured.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    openai_provider = provider_for_model("gpt-4o")
    assert isinstance(openai_provider, OpenAIProvider)
    assert (openai_provider.name, openai_provider.api_key, openai_provider.base_url) == (
        "openai",
        "o-key",
        "http://127.0.0.1:9/v1",
    )
    assert provider_for_model("claude-sonnet-4-6").name == "anthropic"


def test_the_default_model_is_palimpsest_default_model_once_a_provider_is_configured(both_configured):
    both_configured.PALIMPSEST_PROVIDER = "openai"
    both_configured.PALIMPSEST_DEFAULT_MODEL = "gpt-4.1-mini"
    assert default_model() == "gpt-4.1-mini"


def test_the_picker_offers_the_models_of_the_configured_providers(nothing_configured):
    nothing_configured.OPENAI_API_KEY = "o-key"
    offered = models_offered()
    assert offered == ["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "scripted"]


def test_openai_models_have_prices_with_cached_input_and_their_prefixed_names_too(both_configured):
    price = model_price("gpt-4.1")
    assert price is not None and price.cache_read < price.input
    assert model_price("openai/gpt-4.1") == price
    priced = models_priced()
    assert "gpt-4o" in priced and "openai/gpt-4o" in priced and "anthropic/claude-sonnet-4-6" in priced


# -- at session.create -------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_session_create_refuses_a_model_no_configured_provider_serves(connect, fake_openai):
    client = await connect()
    await client.send({"type": "session.create", "model": "claude-sonnet-4-6", "request_id": 1})
    reply = await client.until("error")
    assert reply[-1]["code"] == "invalid_value" and "ANTHROPIC_API_KEY" in reply[-1]["message"]
    assert fake_openai.requests == [] and fake_openai.other_requests == []
    assert await sync_to_async(AgentSession.objects.count)() == 0
    await client.close()


@pytest.mark.django_db(transaction=True)
async def test_the_sessions_state_names_its_provider(connect, fake_openai):
    client = await connect()
    assert (await client.create(model="gpt-4o"))["provider"] == "openai"
    assert (await client.create(model="scripted"))["provider"] == "scripted"
    await client.close()


@pytest.mark.django_db(transaction=True)
async def test_a_server_with_both_providers_answers_each_model_with_its_own(connect, settings):
    with FakeAnthropicServer() as anthropic_fake, FakeOpenAIServer() as openai_fake:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "a", anthropic_fake.url
        settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "o", openai_fake.url
        anthropic_fake.enqueue(text("from claude"))
        openai_fake.enqueue(text("from gpt"))
        client = await connect()
        await client.create(model="claude-sonnet-4-6")
        claude = await chat(client, "hi")
        await client.create(model="gpt-4.1")
        gpt = await chat(client, "hi")
        said = [
            next(f for f in frames if f["type"] == "assistant.message")["content"][0]["text"]
            for frames in (claude, gpt)
        ]
        assert said == ["from claude", "from gpt"]
        assert len(anthropic_fake.requests) == len(openai_fake.requests) == 1
        await client.close()
