"""Operators see and edit MCP servers on an agent's page: the service's and the agent's servers
with their status and tools; attach, change and remove an agent's server with a checked form
(CSRF-protected, staff only). No protocol frame configures one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memory_app.mcp.manager import SERVICE_SCOPE, agent_scope, mcp_manager
from sessions_app.models import AgentMcpServer
from tests.dashboard.agent_data import agent_new
from tests.dashboard.conftest import PASSWORD
from tests.memory_app.mcp.support import script_config, time_config, wait_for

HX = {"HTTP_HX_REQUEST": "true"}


def page(client: Any, agent: Any) -> str:
    return client.get(reverse("dashboard:agent", args=[agent.pk])).content.decode()


@pytest.mark.django_db
def test_the_page_shows_each_server_with_its_status_and_tools(operator_client: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"time": time_config(), "gone": {"command": "/nonexistent/server"}}
    agent = agent_new()
    AgentMcpServer.objects.create(
        agent=agent, name="mine", config=script_config("flaky"), author="operator:op"
    )
    page(operator_client, agent)  # starts them
    manager = mcp_manager(create=False)
    assert manager is not None

    def settled() -> bool:
        states = [
            manager.status(SERVICE_SCOPE, "time"),
            manager.status(SERVICE_SCOPE, "gone"),
            manager.status(agent_scope(agent.pk), "mine"),
        ]
        return all(s is not None and s.state in ("running", "failed") for s in states)

    wait_for(settled)
    html = page(operator_client, agent)
    assert 'data-server="service:time"' in html and 'data-server="agent:mine"' in html
    assert "mcp__time__get_current_time" in html and "mcp__mine__echo" in html
    assert "running" in html and "failed" in html and "No such file or directory" in html
    assert reverse("dashboard:mcp_server_remove", args=[agent.pk, "mine"]) in html
    assert reverse("dashboard:mcp_server_remove", args=[agent.pk, "time"]) not in html


@pytest.mark.django_db
def test_an_operator_attaches_changes_and_removes_a_server(operator: Any) -> None:
    client: Any = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    agent = agent_new()
    url = reverse("dashboard:mcp_server_edit", args=[agent.pk])
    data = {
        "name": "tools",
        "config": json.dumps({"command": "run-it", "env": {"KEY": "hush"}}),
        "enabled": "on",
    }
    assert client.post(url, data, **HX).status_code == 403  # no CSRF token
    assert not AgentMcpServer.objects.exists()
    editor = client.get(url, **HX)
    token = (
        editor.cookies["csrftoken"].value
        if "csrftoken" in editor.cookies
        else client.cookies["csrftoken"].value
    )
    saved = client.post(url, {**data, "csrfmiddlewaretoken": token}, **HX)
    assert saved.status_code == 200 and 'id="agent-mcp"' in saved.content.decode()
    row = AgentMcpServer.objects.get()
    assert (row.name, row.config["env"], row.enabled, row.author) == (
        "tools",
        {"KEY": "hush"},
        True,
        "operator:op",
    )
    # A change that leaves the masked value keeps the secret; a new value replaces it.
    masked = {"command": "run-it", "args": ["-v"], "env": {"KEY": "••••••"}}
    client.post(url, {"name": "tools", "config": json.dumps(masked), "csrfmiddlewaretoken": token}, **HX)
    row.refresh_from_db()
    assert (row.config["args"], row.config["env"], row.enabled) == (["-v"], {"KEY": "hush"}, False)
    bad = client.post(
        url, {"name": "tools", "config": '{"url": "ftp://x"}', "csrfmiddlewaretoken": token}, **HX
    )
    assert bad.status_code == 422 and "http:// or https://" in bad.content.decode()
    bad_name = client.post(url, {**data, "name": "No Caps", "csrfmiddlewaretoken": token}, **HX)
    assert bad_name.status_code == 422 and AgentMcpServer.objects.count() == 1
    remove = reverse("dashboard:mcp_server_remove", args=[agent.pk, "tools"])
    assert client.post(remove, {"csrfmiddlewaretoken": token}, **HX).status_code == 200
    assert not AgentMcpServer.objects.exists()


@pytest.mark.django_db
def test_a_name_the_service_has_is_refused(operator_client: Any, settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"time": time_config()}
    agent = agent_new()
    url = reverse("dashboard:mcp_server_edit", args=[agent.pk])
    refused = operator_client.post(url, {"name": "time", "config": '{"command": "x"}'}, **HX)
    assert refused.status_code == 422 and not AgentMcpServer.objects.exists()


@pytest.mark.django_db
def test_a_non_operator_cannot_reach_the_views(django_user_model: Any, client: Any) -> None:
    agent = agent_new()
    user = django_user_model.objects.create_user("plain", password=PASSWORD, is_staff=False)
    client.force_login(user)
    url = reverse("dashboard:mcp_server_edit", args=[agent.pk])
    response = client.post(url, {"name": "t", "config": '{"command": "x"}'})
    assert response.status_code in (302, 403) and not AgentMcpServer.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_no_protocol_frame_configures_a_server(connect: Any) -> None:
    from asgiref.sync import sync_to_async

    from sessions_app.agent_ws.frames import FRAME_FIELDS

    assert not [t for t, fields in FRAME_FIELDS.items() if "mcp" in t or any("mcp" in f for f in fields)]
    ws = await connect()
    config = {"evil": {"command": "/bin/sh", "args": ["-c", "touch /tmp/pwned"]}}
    await ws.send({"type": "agent.create", "name": "sneaky", "mcp_servers": config})
    assert (await ws.recv())["type"] == "agent.created"
    await ws.send({"type": "session.create", "agent": "sneaky", "settings": {"mcp": {"servers": config}}})
    refused = await ws.recv()
    assert refused["type"] == "error" and refused["code"] == "invalid_settings"
    session = await ws.create(agent="sneaky", mcp_servers=config)
    assert not [n for n in session["server_tools"] if n.startswith("mcp__")]
    assert not await sync_to_async(AgentMcpServer.objects.exists)()
