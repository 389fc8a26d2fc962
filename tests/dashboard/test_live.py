"""Talking to a session from the browser, and the dashboard websockets' live fragments."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from memory_app.notepad import services as memory_services
from sessions_app import services
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, Message, SessionStatus, Turn
from tests.dashboard.conftest import PASSWORD, session_new
from tests.fake_anthropic import FakeAnthropicServer
from tests.sessions_app.conftest import CLIENT_TOOL

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def operator_async_client(operator: Any) -> AsyncClient:
    client = AsyncClient()
    await client.alogin(username="op", password=PASSWORD)
    return client


async def new_session(**fields: Any) -> AgentSession:
    return await sync_to_async(session_new)(**fields)


async def socket(path: str, client: AsyncClient | None = None) -> WebsocketCommunicator:
    from config.asgi import application

    headers = []
    if client is not None:
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_the_dashboard_and_the_websocket_give_a_model_the_same_default_window(
    operator_async_client, connect, settings
):
    with FakeAnthropicServer(models={"claude-custom-both-1": 54321, "claude-custom-sync-1": 65432}) as fake:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "k"
        settings.ANTHROPIC_BASE_URL = fake.url
        # The table does not know the model: the dashboard asks the Models API, as the websocket does.
        response = await operator_async_client.post("/sessions/new/", {"model": "claude-custom-both-1"})
        assert response.status_code == 302
        from_dashboard = await sync_to_async(AgentSession.objects.get)(model="claude-custom-both-1")
        client = await connect()
        from_websocket = await client.create(model="claude-custom-both-1")
        assert from_dashboard.context_window == from_websocket["context_window"] == 54321
        # Sync code (a script, the benchmarks) creating a session gets the same rule.
        session = await sync_to_async(engine_sessions.session_create)(
            owner=None, model="claude-custom-sync-1"
        )
        assert session.context_window == 65432
        lookups = [r.path for r in fake.other_requests]
        assert lookups == ["/v1/models/claude-custom-both-1", "/v1/models/claude-custom-sync-1"]
        await client.close()


async def receive_until(communicator: WebsocketCommunicator, needle: str, timeout: float = 5) -> str:
    """Every fragment received up to and including the first that contains `needle`."""
    received = []
    while True:
        html = await communicator.receive_from(timeout=timeout)
        received.append(html)
        if needle in html:
            return "".join(received)


# ---------------------------------------------------------------------------
# The message box
# ---------------------------------------------------------------------------
async def test_message_box_starts_a_turn_like_a_client(operator_async_client):
    session = await new_session()
    response = await operator_async_client.post(
        f"/sessions/{session.pk}/messages/", {"content": "echo hi there"}
    )
    await runner.turns_wait_idle(timeout=10)
    assert response.status_code == 200 and 'name="content"' in response.content.decode()
    contents = await sync_to_async(lambda: [m.content for m in Message.objects.filter(session=session)])()
    assert contents == [[{"type": "text", "text": "echo hi there"}], [{"type": "text", "text": "hi there"}]]


async def test_message_while_a_turn_runs_is_refused_with_a_visible_error(operator_async_client):
    session = await new_session()
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="first")
    response = await operator_async_client.post(f"/sessions/{session.pk}/messages/", {"content": "second"})
    assert response.status_code == 409
    assert "A turn is running in this session" in response.content.decode()
    assert await sync_to_async(Message.objects.filter(session=session).count)() == 1


async def test_blank_message_is_refused(operator_async_client):
    session = await new_session()
    response = await operator_async_client.post(f"/sessions/{session.pk}/messages/", {"content": "  \n "})
    assert "Write something first." in response.content.decode()
    assert not await sync_to_async(Turn.objects.filter(session=session).exists)()


async def test_cancel_stops_the_running_turn(operator_async_client):
    session = await new_session(tools=[CLIENT_TOOL])
    await operator_async_client.post(
        f"/sessions/{session.pk}/messages/", {"content": "tool client_lookup {}"}
    )
    for _ in range(100):  # until the turn waits for the client's tool result
        if await sync_to_async(lambda: session.tool_calls.exists())():
            break
        await asyncio.sleep(0.02)
    await operator_async_client.post(f"/sessions/{session.pk}/cancel/")
    await runner.turns_wait_idle(timeout=10)
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.stop_reason == "cancelled"


async def test_cancel_without_a_running_turn_says_so(operator_async_client):
    session = await new_session()
    response = await operator_async_client.post(f"/sessions/{session.pk}/cancel/")
    assert "No turn is running." in response.content.decode()


async def test_message_box_needs_an_operator():
    session = await new_session()
    response = await AsyncClient().post(f"/sessions/{session.pk}/messages/", {"content": "hi"})
    assert response.status_code == 302
    assert not await sync_to_async(Turn.objects.filter(session=session).exists)()


# ---------------------------------------------------------------------------
# The session websocket
# ---------------------------------------------------------------------------
async def test_anonymous_socket_is_closed_with_4403():
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/")
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4403}


async def test_non_staff_socket_is_closed_with_4403(django_user_model):
    await sync_to_async(django_user_model.objects.create_user)("visitor", password="pw")
    client = AsyncClient()
    await client.alogin(username="visitor", password="pw")
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/", client)
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4403}


async def test_socket_of_an_unknown_session_is_closed_with_4404(operator_async_client):
    communicator = await socket(
        "/ws/dashboard/sessions/00000000-0000-0000-0000-000000000000/", operator_async_client
    )
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}


async def test_socket_replays_what_came_after_the_page(operator_async_client):
    session = await new_session()
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="while you were away <b>")
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/?since_seq=0", operator_async_client)
    html = await communicator.receive_from()
    assert 'hx-swap-oob="beforeend:#transcript-items"' in html
    assert "while you were away &lt;b&gt;" in html
    assert '<span id="last-seq" data-seq="2" hidden hx-swap-oob="true">' in html
    assert html.count('class="tl-row') == 2  # user.message, turn.started
    assert 'id="session-status" class="badge status-running" hx-swap-oob="true"' in html


async def test_socket_from_the_latest_seq_replays_nothing(operator_async_client):
    session = await new_session()
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="seen")
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/?since_seq=2", operator_async_client)
    assert await communicator.receive_nothing(timeout=0.3)


async def test_a_turn_streams_into_the_page(operator_async_client):
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/?since_seq=0", operator_async_client)
    await runner.turn_start(session_id=session.pk, content="echo streamed words here")
    html = await receive_until(communicator, "turn.completed")
    await runner.turns_wait_idle(timeout=10)
    streamed = "".join(re.findall(r'<span hx-swap-oob="beforeend:#streaming-text">(.*?)</span>', html, re.S))
    assert streamed == "streamed words here"
    final = html.index('<article class="msg assistant"')
    assert html.index("beforeend:#streaming-text") < final
    assert '<div id="streaming" class="msg assistant streaming" hx-swap-oob="true">' in html
    assert 'id="gauge" class="gauge-card" hx-swap-oob="true"' in html
    assert '<span id="inspector-signal" hidden hx-swap-oob="true">' in html
    assert html.rfind("status-idle") > html.rfind("status-running")


async def test_agents_notepad_write_updates_the_preview_and_warns_an_open_editor(operator_async_client):
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/", operator_async_client)
    await sync_to_async(memory_services.notepad_write)(
        session_id=session.pk, content="**found it**", author="agent"
    )
    html = await communicator.receive_from()
    assert (
        'id="notepad-view" class="notepad-view" hx-swap-oob="true"' in html
        and "<strong>found it</strong>" in html
    )
    assert 'id="notepad-revisions"' in html
    assert 'id="notepad-live-notice"' in html and "now version 1 by agent" in html


async def test_operators_own_notepad_save_brings_no_warning(operator_async_client):
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/", operator_async_client)
    await operator_async_client.post(
        f"/sessions/{session.pk}/notepad/edit/", {"content": "mine", "base_version": "0"}
    )
    html = await communicator.receive_from()
    assert 'id="notepad-view"' in html and "notepad-live-notice" not in html


async def test_scratchpad_change_updates_that_space_only(operator_async_client):
    session = await new_session()
    communicator = await socket(f"/ws/dashboard/sessions/{session.pk}/", operator_async_client)
    await runner.turn_start(session_id=session.pk, content="plan: one; two; three")
    html = await receive_until(communicator, "turn.completed")
    await runner.turns_wait_idle(timeout=10)
    assert 'id="scratchpad-plan-view" class="space-view" hx-swap-oob="true"' in html
    assert "1. one\n2. two\n3. three" in html
    assert 'id="scratchpad-notes-view"' not in html


# ---------------------------------------------------------------------------
# The session list's websocket
# ---------------------------------------------------------------------------
async def test_list_socket_refuses_anonymous_visitors():
    communicator = await socket("/ws/dashboard/")
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4403}


async def test_list_socket_rerenders_the_row_of_a_session_with_news(operator_async_client):
    session = await new_session(title="watched")
    communicator = await socket("/ws/dashboard/", operator_async_client)
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="hi")
    html = await communicator.receive_from()
    assert f'<tr id="session-row-{session.pk}" class="session-row status-running" hx-swap-oob="true">' in html
    assert "watched" in html


async def test_list_socket_removes_a_row_that_no_longer_matches_its_filters(operator_async_client):
    session = await new_session(title="watched")
    communicator = await socket("/ws/dashboard/?status=idle", operator_async_client)
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="hi")
    html = await communicator.receive_from()
    assert f'<tr id="session-row-{session.pk}" data-remove hx-swap-oob="delete">' in html


async def test_list_socket_hears_nothing_of_streamed_text(operator_async_client):
    session = await new_session()
    await sync_to_async(AgentSession.objects.filter(pk=session.pk).update)(status=SessionStatus.RUNNING)
    communicator = await socket("/ws/dashboard/", operator_async_client)
    await sync_to_async(services.event_emit)(
        session_id=session.pk, type="assistant.delta", payload={"text": "x"}
    )
    assert await communicator.receive_nothing(timeout=0.3)


async def test_list_socket_shows_a_compacting_session_live(operator_async_client):
    session = await new_session(title="squeezed")
    communicator = await socket("/ws/dashboard/", operator_async_client)
    await sync_to_async(services.session_status_set)(session_id=session.pk, status=SessionStatus.COMPACTING)
    html = await communicator.receive_from()
    assert (
        f'<tr id="session-row-{session.pk}" class="session-row status-compacting" hx-swap-oob="true">' in html
    )
