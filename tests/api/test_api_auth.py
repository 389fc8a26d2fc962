"""The API's bearer tokens and ownership (PROTOCOL.md, "HTTP API v1"): the websocket's tokens,
checked the same way; another client's session or agent is 404; the OpenAPI document and the docs
page need no token and load nothing from another host."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from sessions_app import tokens
from sessions_app.models import AgentToken
from tests.api.conftest import BASE, body, error

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_request_without_a_token_is_401_with_code_and_message() -> None:
    response = await AsyncClient().get(f"{BASE}/sessions")
    assert error(response) == (401, "unauthorized")


async def test_a_wrong_token_is_401(api_client: Any) -> None:
    await api_client()
    response = await AsyncClient().get(f"{BASE}/agents", headers={"Authorization": "Bearer pal_not-a-token"})
    assert error(response) == (401, "unauthorized")


async def test_another_scheme_is_401(api_client: Any) -> None:
    client = await api_client()
    response = await AsyncClient().get(f"{BASE}/agents", headers={"Authorization": f"Basic {client.raw}"})
    assert error(response) == (401, "unauthorized")


async def test_a_revoked_token_is_401(api_client: Any) -> None:
    client = await api_client()
    assert (await client.get("/sessions")).status_code == 200
    await sync_to_async(tokens.agent_tokens_revoke_named)(name=client.token.name)
    assert error(await client.get("/sessions")) == (401, "unauthorized")


async def test_a_request_refreshes_the_tokens_last_use(api_client: Any) -> None:
    client = await api_client()
    assert client.token.last_used_at is None
    await client.get("/agents")
    token = await sync_to_async(AgentToken.objects.get)(pk=client.token.pk)
    assert token.last_used_at is not None


async def test_another_clients_session_is_404_on_every_path(api_client: Any) -> None:
    owner, other = await api_client(), await api_client()
    session = await owner.session(title="mine")
    for method, path, payload in [
        ("get", f"/sessions/{session.pk}", None),
        ("patch", f"/sessions/{session.pk}", {"title": "taken"}),
        ("delete", f"/sessions/{session.pk}", None),
        ("post", f"/sessions/{session.pk}/end", None),
        ("get", f"/sessions/{session.pk}/events", None),
    ]:
        response = await other.call(method, path, payload)
        assert error(response) == (404, "session_not_found"), (method, path)
    assert body(await other.get("/sessions"))["items"] == []
    assert body(await owner.get(f"/sessions/{session.pk}"))["title"] == "mine"


async def test_another_clients_agent_is_404_on_every_path(api_client: Any) -> None:
    owner, other = await api_client(), await api_client()
    await owner.agent("helper")
    for method, path, payload in [
        ("get", "/agents/helper", None),
        ("patch", "/agents/helper", {"model": "x"}),
        ("get", "/agents/helper/versions", None),
        ("get", "/agents/helper/skills", None),
        ("get", "/agents/helper/skills.zip", None),
        ("put", "/agents/helper/skills/s", {"description": "d", "content": "c"}),
        ("get", "/agents/helper/state", None),
        ("put", "/agents/helper/state/k", {"value": 1}),
        ("delete", "/agents/helper", None),
    ]:
        response = await other.call(method, path, payload)
        assert error(response) == (404, "agent_not_found"), (method, path)
    assert body(await other.get("/agents"))["items"] == []
    assert (await owner.get("/agents/helper")).status_code == 200


async def test_a_rotated_token_of_the_same_name_keeps_the_sessions_and_agents(api_client: Any) -> None:
    old = await api_client("rotating")
    session = await old.session(title="kept")
    await old.agent("kept-agent")
    await sync_to_async(tokens.agent_tokens_revoke_named)(name="rotating")
    new = await api_client("rotating")
    assert body(await new.get(f"/sessions/{session.pk}"))["title"] == "kept"
    assert body(await new.get("/agents/kept-agent"))["name"] == "kept-agent"
    assert [s["id"] for s in body(await new.get("/sessions"))["items"]] == [str(session.pk)]


async def test_the_openapi_document_needs_no_token() -> None:
    response = await AsyncClient().get(f"{BASE}/openapi.json")
    assert response.status_code == 200
    document = body(response)
    assert document["openapi"].startswith("3.")
    assert "/api/v1/sessions/{session_id}" in document["paths"]
    assert document["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"


async def test_the_docs_page_needs_no_token_and_names_no_other_host() -> None:
    response = await AsyncClient().get(f"{BASE}/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui-bundle.js" in page
    # Every script, style and link is served here: no CDN, no other host.
    assert re.findall(r"(?:src|href)=[\"']((?:https?:)?//[^\"']+)", page) == []
    assert "cdn" not in page.lower()
