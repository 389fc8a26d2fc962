"""`POST /api/v1/sessions/{id}/tool_calls/{tool_use_id}/approve` and `.../deny` (PROTOCOL.md,
"HTTP API v1"): as `tool.approve` / `tool.deny`, per error and ownership."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessions_app.common.approvals import input_sha256
from sessions_app.engine import runner
from sessions_app.models import SessionEvent, ToolCall
from tests.api.conftest import body, error
from tests.turns import turn_stop_reason

pytestmark = pytest.mark.django_db(transaction=True)

ASK_ECHO = {"approvals": {"test_echo": "always_ask"}}


@pytest.fixture(autouse=True)
def _echo(settings: Any) -> None:
    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "tests.features.ECHO_FEATURE"]


async def _waiting(session_id: Any) -> tuple[Any, ToolCall]:
    """Start a turn whose `test_echo` call waits for an approval; its id and the stored call."""
    turn_id = await runner.turn_start(session_id=session_id, content='tool test_echo {"text": "ping"}')
    event = SessionEvent.objects.filter(session_id=session_id, type="tool.approval_requested")
    while not await event.aexists():  # the turn's own steps, on this event loop
        await asyncio.sleep(0.01)
    call = await ToolCall.objects.aget(session_id=session_id)
    return turn_id, call


async def test_approve_runs_the_call(api_client: Any, vendor: str) -> None:
    client = await api_client()
    session = await client.session(settings=ASK_ECHO)
    turn_id, call = await _waiting(session.pk)
    response = await client.post(
        f"/sessions/{session.pk}/tool_calls/{call.tool_use_id}/approve",
        {"input_sha256": input_sha256({"text": "ping"})},
    )
    assert response.status_code == 200, response.content
    answered = body(response)
    assert answered["approval"] == "approved" and answered["author"] == f"client:{client.token.name}"
    assert answered["input"] == {"text": "ping"}
    assert await turn_stop_reason(turn_id) == "end_turn"
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.status, call.is_error) == ("done", False)
    assert call.result == {"echo": "ping", "step": 1}


async def test_deny_with_a_reason_and_without_a_body(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(settings=ASK_ECHO)
    turn_id, call = await _waiting(session.pk)
    response = await client.post(
        f"/sessions/{session.pk}/tool_calls/{call.tool_use_id}/deny", {"reason": "no"}
    )
    assert body(response)["approval"] == "denied" and body(response)["reason"] == "no"
    assert await turn_stop_reason(turn_id) == "end_turn"
    call = await ToolCall.objects.aget(pk=call.pk)
    assert call.is_error is True
    # Another turn's call, denied without a body.
    turn_id, _ = await _waiting_again(session.pk)
    second = await ToolCall.objects.filter(session_id=session.pk, approval="pending").aget()
    response = await client.post(
        f"/sessions/{session.pk}/tool_calls/{second.tool_use_id}/deny",
        data=b"",
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert body(response)["approval"] == "denied" and body(response)["reason"] == ""
    assert await turn_stop_reason(turn_id) == "end_turn"


async def _waiting_again(session_id: Any) -> tuple[Any, int]:
    before = await SessionEvent.objects.filter(session_id=session_id, type="tool.approval_requested").acount()
    turn_id = await runner.turn_start(session_id=session_id, content='tool test_echo {"text": "again"}')
    event = SessionEvent.objects.filter(session_id=session_id, type="tool.approval_requested")
    while await event.acount() == before:
        await asyncio.sleep(0.01)
    return turn_id, before


async def test_errors_change_nothing(api_client: Any, vendor: str) -> None:
    client = await api_client()
    other = await api_client()
    session = await client.session(settings=ASK_ECHO)
    turn_id, call = await _waiting(session.pk)
    path = f"/sessions/{session.pk}/tool_calls/{call.tool_use_id}"
    assert error(await other.post(f"{path}/approve", {})) == (404, "session_not_found")
    assert error(await client.post(f"/sessions/{session.pk}/tool_calls/toolu_nope/approve", {})) == (
        404,
        "unknown_tool_use_id",
    )
    assert error(await client.post(f"{path}/approve", {"input_sha256": "0" * 64})) == (
        409,
        "approval_input_mismatch",
    )
    assert error(await client.post(f"{path}/deny", {"reason": "x" * 2001})) == (400, "invalid_value")
    assert error(await client.post(f"{path}/deny", {"reason": 3})) == (400, "invalid_value")
    assert error(await client.post(f"{path}/approve", {"approved": True})) == (400, "invalid_value")
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.approval, call.approval_author) == ("pending", "")
    assert not await SessionEvent.objects.filter(type="tool.approval_answered").aexists()
    assert body(await client.post(f"{path}/approve", {}))["approval"] == "approved"
    assert await turn_stop_reason(turn_id) == "end_turn"
    assert error(await client.post(f"{path}/deny", {})) == (409, "approval_not_pending")


async def test_a_cancelled_turn_s_call_cannot_be_answered(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(settings=ASK_ECHO)
    turn_id, call = await _waiting(session.pk)
    assert (await client.post(f"/sessions/{session.pk}/end")).status_code == 200
    assert await runner.turn_wait(turn_id) in (None, "cancelled")
    path = f"/sessions/{session.pk}/tool_calls/{call.tool_use_id}/approve"
    assert error(await client.post(path, {})) == (409, "approval_not_pending")
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.status, call.started_at) == ("done", None)
