"""PALIMPSEST_SANDBOX: `auto`, `bwrap` and `off`, with bubblewrap present, missing or failing."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory_app.sandbox.errors import SandboxUnavailable
from memory_app.sandbox.jail import sandbox_available
from tests.memory_app.sandbox.support import run

HAS_BWRAP = shutil.which("bwrap") is not None


@pytest.fixture(autouse=True)
def _sandbox_on() -> None:
    """These tests choose the mode themselves (overrides conftest's fixture: no skip)."""


@pytest.fixture
def no_bwrap(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.fixture
def failing_bwrap(monkeypatch: Any) -> Iterator[None]:
    """A `bwrap` that fails as it does under a container's seccomp profile; first on PATH.

    In a directory anyone can reach: as root the launcher runs bubblewrap as nobody."""
    directory = tempfile.mkdtemp(prefix="palimpsest-fake-bwrap-")
    os.chmod(directory, 0o755)
    fake = Path(directory) / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    yield
    shutil.rmtree(directory)


def test_off_is_never_available(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "off"
    assert sandbox_available() is False


async def test_off_refuses_to_run(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "off"
    with pytest.raises(SandboxUnavailable):
        await run("print(1)")


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is not installed (make test installs it)")
@pytest.mark.parametrize("mode", ["auto", "bwrap", " Auto "])
def test_with_a_working_bubblewrap_it_is_available(settings: Any, mode: str) -> None:
    settings.PALIMPSEST_SANDBOX = mode
    assert sandbox_available() is True


@pytest.mark.usefixtures("no_bwrap")
def test_auto_without_bubblewrap_is_off(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "auto"
    assert sandbox_available() is False


@pytest.mark.usefixtures("no_bwrap")
def test_bwrap_without_bubblewrap_is_a_configuration_error(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "bwrap"
    with pytest.raises(ImproperlyConfigured, match="bubblewrap .`bwrap`. is not installed"):
        sandbox_available()


@pytest.mark.usefixtures("failing_bwrap")
def test_auto_with_a_failing_bubblewrap_is_off(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "auto"
    assert sandbox_available() is False


@pytest.mark.usefixtures("failing_bwrap")
def test_bwrap_with_a_failing_bubblewrap_says_why(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "bwrap"
    with pytest.raises(ImproperlyConfigured, match="trial run failed .exit 1.: bwrap: No permissions"):
        sandbox_available()


@pytest.mark.usefixtures("failing_bwrap")
async def test_a_run_with_a_failing_bubblewrap_is_refused(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "auto"
    with pytest.raises(SandboxUnavailable):
        await run("print(1)")


def test_an_unknown_mode_is_a_configuration_error(settings: Any) -> None:
    settings.PALIMPSEST_SANDBOX = "docker"
    with pytest.raises(ImproperlyConfigured, match="auto, bwrap, off"):
        sandbox_available()
