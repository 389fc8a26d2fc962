"""The built-in table of context windows (`engine.model_table`) against seed 002's."""

from __future__ import annotations

import pytest

from sessions_app.engine import providers
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.model_table import MODEL_ALIASES, MODEL_CONTEXT_WINDOWS

# Seed 002's "Context Window Sizes", as the seed writes them.
SEED_002_WINDOWS = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_000_000,
    "gpt-4.1-mini": 1_000_000,
    "claude-sonnet-4-20250514": 200_000,
    "claude-opus-4-20250514": 200_000,
    "claude-haiku-3-20250307": 200_000,
}


@pytest.mark.parametrize(("model", "window"), SEED_002_WINDOWS.items())
def test_each_model_of_seed_002s_table_resolves_to_the_seeds_window(model, window, fake_anthropic):
    providers._api_windows.clear()
    assert providers.context_window_resolve_sync(model) == window
    assert fake_anthropic.other_requests == []  # from the table, not the Models API


@pytest.mark.parametrize(("model", "window"), SEED_002_WINDOWS.items())
def test_each_model_of_seed_002s_table_resolves_with_the_scripted_provider_too(model, window, settings):
    settings.PALIMPSEST_PROVIDER = "scripted"
    assert providers.context_window_resolve_sync(model) == window


def test_the_seeds_claude_3_haiku_name_is_an_alias_of_its_real_id():
    assert MODEL_ALIASES["claude-haiku-3-20250307"] == "claude-3-haiku-20240307"
    assert providers.context_window_resolve_sync("claude-3-haiku-20240307") == 200_000


def test_every_alias_names_a_model_of_the_table():
    assert set(MODEL_ALIASES.values()) <= set(MODEL_CONTEXT_WINDOWS)
    assert not set(MODEL_ALIASES) & set(MODEL_CONTEXT_WINDOWS)


@pytest.mark.django_db
def test_a_session_of_the_seeds_haiku_name_gets_the_seeds_window():

    session = engine_sessions.session_create(owner=None, model="claude-haiku-3-20250307")
    assert (session.model, session.context_window) == ("claude-haiku-3-20250307", 200_000)
