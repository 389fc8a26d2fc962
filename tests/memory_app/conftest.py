"""Each memory feature's tests see only that feature in the prompt, unless a test asks for both."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.engine.features import features


@pytest.fixture
def without_scratchpad(monkeypatch: Any) -> None:
    monkeypatch.setitem(features().default_settings["scratchpad"], "enabled", False)


@pytest.fixture
def without_notepad(monkeypatch: Any) -> None:
    monkeypatch.setitem(features().default_settings["notepad"], "enabled", False)


@pytest.fixture
def strict_anthropic(settings: Any) -> Any:
    """The fake Messages API in strict mode (a request the real API would refuse for its tool
    pairs or roles gets a 400), with the service pointed at it through the real SDK."""
    from tests.fake_anthropic import FakeAnthropicServer

    with FakeAnthropicServer(strict=True) as server:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.url
        yield server


@pytest.fixture
def without_tasks(monkeypatch: Any) -> None:
    monkeypatch.setitem(features().default_settings["tasks"], "enabled", False)
