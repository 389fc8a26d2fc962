"""`make run` tells a newcomer how to log in: a local operator is made on first start."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from sessions_app.management.commands import palimpsest_welcome

pytestmark = pytest.mark.django_db


def welcome(monkeypatch, tmp_path) -> str:
    monkeypatch.setattr(palimpsest_welcome, "PASSWORD_FILE", tmp_path / "operator-password")
    out = io.StringIO()
    call_command("palimpsest_welcome", "--port", "8123", stdout=out)
    return out.getvalue()


def test_first_start_makes_an_operator_who_can_open_the_dashboard(monkeypatch, tmp_path, client):
    printed = welcome(monkeypatch, tmp_path)
    password = re.search(r"Log in as 'admin' with password '([^']+)'", printed).group(1)  # type: ignore[union-attr]
    assert "http://127.0.0.1:8123/" in printed
    assert client.login(username="admin", password=password)
    assert client.get("/").status_code == 200


def test_a_later_start_makes_no_second_operator_and_says_the_same(monkeypatch, tmp_path):
    first = welcome(monkeypatch, tmp_path)
    second = welcome(monkeypatch, tmp_path)
    assert get_user_model().objects.filter(is_superuser=True).count() == 1
    assert first == second


def test_it_tells_how_to_chat_from_the_terminal(monkeypatch, tmp_path):
    printed = welcome(monkeypatch, tmp_path)
    assert "ws://127.0.0.1:8123/ws/agent/" in printed
    assert "Chat from a terminal: `make chat PORT=8123` in another terminal" in printed


def test_it_says_which_folder_the_file_tools_read(monkeypatch, tmp_path, settings):
    settings.PALIMPSEST_FS_ROOT = ""
    assert "File tools read" not in welcome(monkeypatch, tmp_path)
    settings.PALIMPSEST_FS_ROOT = str(tmp_path / "files")
    assert f"File tools read {tmp_path / 'files'} (with the scripted model" in welcome(monkeypatch, tmp_path)


def test_it_says_which_providers_answer(monkeypatch, tmp_path, settings):
    settings.ANTHROPIC_API_KEY = ""
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    settings.PALIMPSEST_PROVIDER = "scripted"
    assert "none configured, so the scripted model answers every session" in welcome(monkeypatch, tmp_path)
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    assert "Model providers: openai (sessions default to " in welcome(monkeypatch, tmp_path)
