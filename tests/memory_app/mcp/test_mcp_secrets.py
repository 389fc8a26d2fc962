"""A server's environment and secrets never reach the model or a client: the configured env
values are masked in what the server says, the service's own environment is not the server's,
and no stored event, tool list or dashboard page holds a secret."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from sessions_app import services
from sessions_app.models import Agent, SessionEvent
from tests.dashboard.conftest import PASSWORD
from tests.memory_app.mcp.support import SECRET, call, create, result, script_config, text_of, turn

pytestmark = pytest.mark.django_db(transaction=True)
SERVICE_CANARY = "service-only-canary-91d2"


async def test_no_secret_reaches_the_model_an_event_or_the_dashboard(
    connect: Any, monkeypatch: Any, django_user_model: Any, client: Any
) -> None:
    monkeypatch.setenv("PALIMPSEST_TEST_CANARY", SERVICE_CANARY)
    ws = await connect()
    await ws.send({"type": "agent.create", "name": "keeper"})
    assert (await ws.recv())["type"] == "agent.created"
    agent = await sync_to_async(Agent.objects.get)(name="keeper")
    await sync_to_async(services.agent_mcp_server_set)(
        agent_id=agent.pk,
        name="flaky",
        config=script_config("flaky", env={"API_TOKEN": SECRET}),
        author="operator:test",
    )
    session = await create(ws, agent="keeper")
    told = result(await turn(ws, call("mcp__flaky__getenv", {"name": "API_TOKEN"})))
    assert SECRET not in text_of(told) and "••••••" in text_of(told)
    leaked = result(await turn(ws, call("mcp__flaky__getenv", {"name": "PALIMPSEST_TEST_CANARY"})))
    assert SERVICE_CANARY not in text_of(leaked)
    failed = result(await turn(ws, call("mcp__flaky__leak_in_error", {"name": "API_TOKEN"})))
    assert failed["is_error"] and "the value is ••••••" in text_of(failed)
    stored = await sync_to_async(lambda: [json.dumps(e.payload) for e in SessionEvent.objects.all()])()
    assert stored and not [p for p in stored if SECRET in p or SERVICE_CANARY in p]
    assert SECRET not in json.dumps(session)
    operator = await sync_to_async(django_user_model.objects.create_user)(
        "op", password=PASSWORD, is_staff=True
    )
    await sync_to_async(client.force_login)(operator)
    page = await sync_to_async(client.get)(reverse("dashboard:agent", args=[agent.pk]))
    html = page.content.decode()
    assert 'id="agent-mcp"' in html and "API_TOKEN" in html and SECRET not in html
    editor = await sync_to_async(client.get)(
        reverse("dashboard:mcp_server_edit", args=[agent.pk]), {"name": "flaky"}
    )
    assert "API_TOKEN" in editor.content.decode() and SECRET not in editor.content.decode()
