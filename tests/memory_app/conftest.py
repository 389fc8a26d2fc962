"""Each memory feature's tests see only that feature in the prompt, unless a test asks for both."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.validation import default_settings


@pytest.fixture
def without_scratchpad(monkeypatch: Any) -> None:
    monkeypatch.setitem(default_settings()["scratchpad"], "enabled", False)


@pytest.fixture
def without_notepad(monkeypatch: Any) -> None:
    monkeypatch.setitem(default_settings()["notepad"], "enabled", False)
