"""A message too large for the server to read gets a form error, not Django's error page."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from sessions_app.dashboard.middleware import TOO_LARGE_EVENT
from sessions_app.models import Message, Turn
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db

OVER_LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024


def test_an_htmx_post_too_large_to_read_gets_413_and_an_event_with_the_error(operator_client):
    session = session_new()
    response = operator_client.post(
        f"/sessions/{session.pk}/messages/", {"content": "x" * OVER_LIMIT}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 413
    assert response["HX-Reswap"] == "none"  # the form, with what was typed, stays as it is
    message = json.loads(response["HX-Trigger"])[TOO_LARGE_EVENT]["value"]
    assert "too large to send" in message
    assert not Message.objects.filter(session=session).exists()
    assert not Turn.objects.filter(session=session).exists()


def test_a_plain_post_too_large_to_read_gets_413_with_a_readable_reason(operator_client):
    session = session_new()
    response = operator_client.post(f"/sessions/{session.pk}/messages/", {"content": "x" * OVER_LIMIT})
    assert response.status_code == 413
    assert "too large to send" in response.content.decode()


def test_a_post_under_the_limit_still_reaches_the_form(operator_client):
    session = session_new()
    response = operator_client.post(
        f"/sessions/{session.pk}/messages/", {"content": "x" * 1_000_000}, headers={"HX-Request": "true"}
    )
    assert "at most 200000 characters" in response.content.decode()
