"""Budgets through the HTTP API (PROTOCOL.md, "HTTP API v1"): `PATCH /api/v1/sessions/{id}` with
`settings.budget` raises a budget as `session.update` does; a bad value is a 400 that changes
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine import runner
from sessions_app.models import AgentSession, Turn
from tests.api.conftest import body, error

pytestmark = pytest.mark.django_db(transaction=True)


async def turn(session_id: Any, content: str) -> str:
    turn_id = await runner.turn_start(session_id=session_id, content=content)
    await runner.turns_wait_idle(timeout=30)
    return await sync_to_async(lambda: Turn.objects.get(pk=turn_id).stop_reason)()


async def test_patch_raises_the_budget_and_the_next_message_goes_on(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(settings={"budget": {"max_output_tokens": 0}})
    assert await turn(session.pk, "echo one") == "budget_reached"
    response = await client.patch(
        f"/sessions/{session.pk}", {"settings": {"budget": {"max_output_tokens": 10_000}}}
    )
    assert response.status_code == 200
    assert body(response)["settings"]["budget"]["max_output_tokens"] == 10_000
    assert await turn(session.pk, "echo two") == "end_turn"


@pytest.mark.parametrize("limits", [{"max_output_tokens": -1}, {"max_cost_usd": [1]}, {"per_day": 5}])
async def test_patch_with_a_bad_budget_is_400_and_changes_nothing(api_client: Any, limits: dict) -> None:
    client = await api_client()
    session = await client.session(title="kept", settings={"budget": {"max_output_tokens": 7}})
    response = await client.patch(
        f"/sessions/{session.pk}", {"title": "changed", "settings": {"budget": limits}}
    )
    assert error(response) == (400, "invalid_settings")
    stored = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert (stored.title, stored.settings["budget"]["max_output_tokens"]) == ("kept", 7)
