"""The session page's Delete (issue 30 item 14): the same operation as the admin's delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from sessions_app import services
from sessions_app.models import AgentSession
from tests.dashboard.conftest import session_new
from tests.sessions_app.session_tree_support import rows_left, session_full

pytestmark = pytest.mark.django_db(transaction=True)


async def operator_async_client(operator: Any) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(operator)
    return client


async def test_the_session_page_has_a_delete_button_with_a_confirmation(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="shown")
    client = await operator_async_client(operator)
    page = (await client.get(f"/sessions/{session.pk}/")).content.decode()
    assert f'hx-post="/sessions/{session.pk}/delete/"' in page
    assert 'hx-confirm="Delete this session' in page


async def test_delete_from_the_dashboard_leaves_nothing_and_goes_to_the_list(
    settings: Any, tmp_path: Path, operator: Any
) -> None:
    session = await session_full(settings, tmp_path)
    client = await operator_async_client(operator)
    response = await client.post(f"/sessions/{session.pk}/delete/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/"
    assert await sync_to_async(rows_left)() == {}


async def test_a_plain_post_is_redirected_to_the_list(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="plain")
    client = await operator_async_client(operator)
    response = await client.post(f"/sessions/{session.pk}/delete/")
    assert (response.status_code, response["Location"]) == (302, "/")
    assert not await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


async def test_delete_while_a_turn_runs_is_refused_with_a_message(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="busy")
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="working")
    client = await operator_async_client(operator)
    response = await client.post(f"/sessions/{session.pk}/delete/", headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert "A turn is running in this session" in response.content.decode()
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


def test_a_post_without_the_csrf_token_is_refused(operator: Any) -> None:
    session = session_new(title="kept")
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(f"/sessions/{session.pk}/delete/", headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert AgentSession.objects.filter(pk=session.pk).exists()


def test_delete_needs_a_post_and_an_operator(client: Any) -> None:
    session = session_new(title="kept")
    assert client.post(f"/sessions/{session.pk}/delete/").status_code == 302  # to the login page
    assert AgentSession.objects.filter(pk=session.pk).exists()


def test_delete_by_get_is_not_allowed(operator_client: Any) -> None:
    session = session_new(title="kept")
    assert operator_client.get(f"/sessions/{session.pk}/delete/").status_code == 405
    assert AgentSession.objects.filter(pk=session.pk).exists()
