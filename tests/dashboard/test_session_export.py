"""The session page's Export (docs/export.md): operators download the session as one JSON
document, streamed; anyone else is sent to log in; a session that does not exist is a 404."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.dashboard.conftest import PASSWORD, chat, session_new

pytestmark = pytest.mark.django_db(transaction=True)


def _document(response: Any) -> dict:
    """The streamed document (an async stream: the service runs under daphne)."""
    assert response.streaming

    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return json.loads(async_to_sync(read)())


def test_an_operator_exports_the_session_from_its_page(operator_client: Any) -> None:
    session = session_new(title="Audit Q3")
    chat(session.pk, "remember: the Q3 gap is in EMEA")
    page = operator_client.get(reverse("dashboard:session", args=[session.pk]))
    url = reverse("dashboard:session_export", args=[session.pk])
    assert f'href="{url}" download' in page.content.decode()
    response = operator_client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="session-{session.pk}.json"'
    document = _document(response)
    assert document["format"] == "palimpsest.session/1"
    assert document["session"]["session"]["notepad"] == "the Q3 gap is in EMEA\n"
    assert [m["role"] for m in document["session"]["messages"]][:2] == ["user", "assistant"]


def test_only_operators_export_and_a_missing_session_is_404(operator_client: Any) -> None:
    session = session_new(title="Private")
    url = reverse("dashboard:session_export", args=[session.pk])
    assert "/accounts/login/" in Client().get(url)["Location"]
    get_user_model().objects.create_user("visitor", password=PASSWORD, is_staff=False)
    visitor = Client()
    visitor.login(username="visitor", password=PASSWORD)
    assert "/accounts/login/" in visitor.get(url)["Location"]
    assert operator_client.post(url).status_code == 405
    missing = reverse("dashboard:session_export", args=[uuid.uuid4()])
    assert operator_client.get(missing).status_code == 404
