"""The dashboard's Approvals page and an operator's answers (the browser test walks the same at 800
and 1440 px): the calls that wait across sessions, with their input escaped; an answer as
`operator:<username>` wakes the turn; a refused answer (a stale input, another call, no decision)
says why with a 409 and changes nothing; only operators see or answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.test import AsyncClient
from django.urls import reverse

from sessions_app.common.approvals import input_sha256
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import SessionEvent, ToolCall, Turn
from tests.turns import turn_stop_reason

pytestmark = pytest.mark.django_db(transaction=True)

ASK = {"approvals": {"count_words": "always_ask"}}
HOSTILE = "<script>alert(1)</script> a b"
HTMX = {"HX-Request": "true"}


@pytest.fixture
async def operator_async(django_user_model: Any) -> AsyncClient:
    user = await django_user_model.objects.acreate(username="op", is_staff=True)
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def _waiting(title: str, words: str = HOSTILE) -> tuple[Any, Any, ToolCall]:
    session = await asyncio.to_thread(
        engine_sessions.session_create,
        owner=None,
        title=title,
        settings=ASK,
        reserved_tool_names=features().tool_names(),
    )
    turn_id = await runner.turn_start(
        session_id=session.pk, content=f'tool count_words {{"text": "{words}"}}'
    )
    asked = SessionEvent.objects.filter(session_id=session.pk, type="tool.approval_requested")
    while not await asked.aexists():  # the turn's steps, on this event loop
        await asyncio.sleep(0.01)
    return session, turn_id, await ToolCall.objects.aget(session_id=session.pk)


def _answer_url(session: Any) -> str:
    return reverse("dashboard:approval_answer", args=[session.pk])


async def test_the_page_lists_calls_across_sessions_with_their_input_escaped(operator_async, vendor):
    first, first_turn, first_call = await _waiting("First")
    second, second_turn, second_call = await _waiting("Second", "x y")
    html = (await operator_async.get(reverse("dashboard:approvals"))).content.decode()
    assert html.index(first_call.tool_use_id) < html.index(second_call.tool_use_id)  # oldest first
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert reverse("dashboard:session", args=[first.pk]) in html and ">Second</a>" in html
    assert f'href="{reverse("dashboard:approvals")}"' in html  # the nav, with the count
    assert 'title="Tool calls waiting for an approval">2</span>' in html
    assert input_sha256(first_call.input) in html
    # The session's page shows its own call only.
    page = (await operator_async.get(reverse("dashboard:session", args=[second.pk]))).content.decode()
    assert second_call.tool_use_id in page and first_call.tool_use_id not in page
    for session, turn_id in ((first, first_turn), (second, second_turn)):
        await runner.EngineTurns().cancel(session_id=session.pk, turn_id=turn_id, wait_seconds=10)
    html = (await operator_async.get(reverse("dashboard:approvals"))).content.decode()
    assert "No tool call is waiting for an approval." in html and "data-approvals-waiting" not in html


async def test_an_operator_approves_and_the_call_runs(operator_async, vendor):
    session, turn_id, call = await _waiting("Approve me")
    response = await operator_async.post(
        _answer_url(session),
        {
            "tool_use_id": call.tool_use_id,
            "decision": "approve",
            "input_sha256": input_sha256(call.input),
            "where": "list",
        },
        headers=HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert call.tool_use_id not in html
    # The top bar's count comes along, out of band: nothing waits now.
    assert '<span id="approvals-badge" hx-swap-oob="true"></span>' in html
    assert await turn_stop_reason(turn_id) == "end_turn"
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.approval, call.approval_author, call.is_error) == ("approved", "operator:op", False)


async def test_an_operator_denies_from_the_session_page(operator_async):
    session, turn_id, call = await _waiting("Deny me")
    response = await operator_async.post(
        _answer_url(session),
        {"tool_use_id": call.tool_use_id, "decision": "deny", "reason": "no", "where": "session"},
    )
    assert response.status_code == 302 and response["Location"] == reverse(
        "dashboard:session", args=[session.pk]
    )
    assert await turn_stop_reason(turn_id) == "end_turn"
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.approval, call.approval_reason, call.is_error) == ("denied", "no", True)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"decision": "approve", "input_sha256": "0" * 64}, "another input"),
        ({"decision": "approve", "tool_use_id": "toolu_other"}, "no tool call"),
        ({}, "decision"),
        ({"decision": "maybe"}, "decision"),
        ({"decision": "deny", "reason": "x" * 2001}, "reason"),
    ],
)
async def test_refused_answers_say_why_and_change_nothing(operator_async, fields, says):
    session, turn_id, call = await _waiting("Refused")
    response = await operator_async.post(
        _answer_url(session), {"tool_use_id": call.tool_use_id, "where": "list", **fields}, headers=HTMX
    )
    assert response.status_code == 409
    assert says in response.content.decode()
    call = await ToolCall.objects.aget(pk=call.pk)
    assert (call.approval, call.approval_author) == ("pending", "")
    assert not await SessionEvent.objects.filter(type="tool.approval_answered").aexists()
    await runner.EngineTurns().cancel(session_id=session.pk, turn_id=turn_id, wait_seconds=10)


async def test_only_operators_see_or_answer(django_user_model):
    session, turn_id, call = await _waiting("Private")
    user = await django_user_model.objects.acreate(username="nobody", is_staff=False)
    client = AsyncClient()
    await client.aforce_login(user)
    listed = await client.get(reverse("dashboard:approvals"))
    assert listed.status_code == 302 and call.tool_use_id not in listed.content.decode()
    answered = await client.post(
        _answer_url(session), {"tool_use_id": call.tool_use_id, "decision": "approve"}
    )
    assert answered.status_code == 302
    assert (await ToolCall.objects.aget(pk=call.pk)).approval == "pending"
    await runner.EngineTurns().cancel(session_id=session.pk, turn_id=turn_id, wait_seconds=10)


# -- the top bar's count, live ------------------------------------------------------------------
async def _badge(communicator: Any, shows: str, timeout: float = 10) -> str:
    """The first frame of `communicator` whose top bar's count holds `shows` (rows, events and
    counts sent before, say at the end of an earlier test's turn, aside)."""
    while True:
        html = await communicator.receive_from(timeout=timeout)
        if 'id="approvals-badge"' in html and shows in html:
            return html


async def test_the_top_bars_count_follows_calls_asked_and_answered_on_every_open_page(operator_async):
    from tests.dashboard.test_live import socket

    watched = await asyncio.to_thread(
        engine_sessions.session_create,
        owner=None,
        title="watched",
        reserved_tool_names=features().tool_names(),
    )
    # The session list and another session's page are open; a call waits in a third session.
    listing = await socket("/ws/dashboard/", operator_async)
    page = await socket(f"/ws/dashboard/sessions/{watched.pk}/", operator_async)
    session, turn_id, call = await _waiting("Asks")
    for communicator in (listing, page):
        html = await _badge(communicator, 'title="Tool calls waiting for an approval">1</span>')
        assert 'hx-swap-oob="true"' in html
    # Denied from the Approvals page: the count goes, on every page.
    response = await operator_async.post(
        _answer_url(session),
        {"tool_use_id": call.tool_use_id, "decision": "deny", "reason": "no", "where": "list"},
        headers=HTMX,
    )
    assert response.status_code == 200
    for communicator in (listing, page):
        await _badge(communicator, '<span id="approvals-badge" hx-swap-oob="true"></span>')
        await communicator.disconnect()
    await runner.turn_wait(turn_id)  # None once it has ended: it ends as soon as the call is denied
    assert (await Turn.objects.aget(pk=turn_id)).stop_reason == "end_turn"
