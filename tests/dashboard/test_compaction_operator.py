"""An operator compacts a session by hand from its page; compactions show their receipt."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from sessions_app.engine import runner
from sessions_app.models import AgentSession, Archive, Message, SessionEvent
from tests.dashboard.conftest import chat, session_new

pytestmark = pytest.mark.django_db(transaction=True)
FILLER = "palimpsest " * 50


async def operator_async_client(operator: Any) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(operator)
    return client


def events(session: AgentSession) -> list[dict]:
    return [e.as_frame() for e in SessionEvent.objects.filter(session=session).order_by("seq")]


async def test_compact_now_summarizes_the_whole_epoch_and_tells_no_turn(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="by hand")
    for index in range(2):
        await sync_to_async(chat)(session.pk, f"request {index}: {FILLER}")
    before = len(await sync_to_async(events)(session))
    client = await operator_async_client(operator)
    response = await client.post(f"/sessions/{session.pk}/compact/")
    assert response.status_code == 200
    await runner.turns_wait_idle(timeout=10)
    archive = await sync_to_async(Archive.objects.get)(session=session)
    assert (archive.trigger, archive.kept_messages, archive.epoch) == ("operator", 0, 0)
    assert archive.summary.startswith("User requests: request 0:")
    session = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert (session.epoch, session.status, session.current_turn_id) == (1, "idle", None)
    new = [e["type"] for e in (await sync_to_async(events)(session))[before:]]
    assert "compaction.completed" in new and not any(t.startswith("turn.") for t in new)
    # Only the summary starts the new epoch: nothing of a turn was running.
    assert await sync_to_async(Message.objects.filter(session=session, epoch=1).count)() == 1
    # The page shows the compaction with its receipt.
    page = (await client.get(f"/sessions/{session.pk}/")).content.decode()
    # Nothing was running, so the receipt says nothing of messages kept verbatim.
    assert re.search(r"operator · \d+\.\d s · [\d,]+ → [\d,]+ tokens", page)
    assert "kept verbatim" not in page
    # The summary call predicted no prompt size: the inspector says so rather than "0".
    inspector = (await client.get(f"/sessions/{session.pk}/inspector/")).content.decode()
    assert "predicted —" in inspector and "predicted 0" not in inspector


async def test_compact_now_is_refused_while_a_turn_runs(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="busy")
    await sync_to_async(AgentSession.objects.filter(pk=session.pk).update)(
        current_turn_id=session.pk, lease_expires_at="2999-01-01T00:00:00Z"
    )
    client = await operator_async_client(operator)
    response = await client.post(f"/sessions/{session.pk}/compact/")
    assert response.status_code == 409 and "A turn is running" in response.content.decode()
    assert await sync_to_async(Archive.objects.count)() == 0


async def test_compact_now_with_nothing_to_compact_says_so(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="empty")
    client = await operator_async_client(operator)
    await client.post(f"/sessions/{session.pk}/compact/")
    await runner.turns_wait_idle(timeout=10)
    errors = [e for e in await sync_to_async(events)(session) if e["type"] == "error"]
    assert (
        errors and errors[0]["code"] == "compaction_failed" and "nothing to compact" in errors[0]["message"]
    )
    session = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert (session.epoch, session.current_turn_id) == (0, None)


async def test_compact_now_needs_a_post_and_an_operator(client: Any) -> None:
    session = await sync_to_async(session_new)(title="guarded")
    assert (await sync_to_async(client.get)(f"/sessions/{session.pk}/compact/")).status_code in (302, 405)
    response = await sync_to_async(client.post)(f"/sessions/{session.pk}/compact/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


async def test_a_message_kept_verbatim_by_a_compaction_shows_once_in_the_transcript(operator: Any) -> None:
    session = await sync_to_async(session_new)(title="kept", context_window=4000, compact_threshold=0.5)
    index = 0
    while not await sync_to_async(Archive.objects.filter(session=session).exists)() and index < 10:
        await sync_to_async(chat)(session.pk, f"unique-{index}: {'palimpsest ' * 300}")
        index += 1
    archive = await sync_to_async(Archive.objects.get)(session=session)
    assert archive.kept_messages >= 1
    client = await operator_async_client(operator)
    page = (await client.get(f"/sessions/{session.pk}/")).content.decode()
    transcript = page[
        page.index('id="transcript-items"') : page.index('<script>document.getElementById("transcript")')
    ]
    assert transcript.count(f'<div class="body plain">unique-{index - 1}: palimpsest') == 1
    assert "threshold · 1 message of the running turn kept verbatim" in transcript
