"""A session's export and import (docs/export.md): a session run by the real engine, exported
and imported, makes the same next request as the original; bad documents are refused naming what
is wrong, with nothing written."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine import transfer
from sessions_app.models import AgentSession, AgentToken, Archive, MaskedResult, RecallDocument
from tests.sessions_app.transfer_support import (
    chat,
    full_session,
    id_pairs,
    mask_latest_result,
    next_request,
    normalised,
    one_more_result,
)
from tests.turns import turn_stop_reason

pytestmark = pytest.mark.django_db(transaction=True)


def export_text(session_id: Any) -> str:
    return "".join(transfer.export_chunks(uuid.UUID(str(session_id))))


def import_text(text: str, token_name: str) -> AgentSession:
    owner = AgentToken.objects.filter(name=token_name).first()
    assert owner is not None
    return transfer.session_import(json.loads(text), owner=owner)


async def test_an_imported_session_makes_the_same_next_request_and_runs_a_turn(
    connect, make_token, echo_tool, vendor
):
    token = await make_token("exporter")
    session = await full_session(connect, token)
    original = uuid.UUID(session["id"])
    await sync_to_async(mask_latest_result)(original)
    await one_more_result(connect, token, original)
    text = await sync_to_async(export_text)(original)
    document = json.loads(text)
    assert document["format"] == "palimpsest.session/1"
    assert document["session"]["children"], "the child is nested"
    assert document["session"]["features"]["observations"][0]["chunks"]

    importer = await make_token("importer")
    imported = await sync_to_async(import_text)(text, "importer")
    assert imported.pk != original
    counts = await sync_to_async(
        lambda: (
            Archive.objects.filter(session_id=imported.pk).count(),
            MaskedResult.objects.filter(session_id=imported.pk).count(),
            RecallDocument.objects.filter(session_id=imported.pk).count(),
            RecallDocument.objects.filter(session_id=original).count(),
        )
    )()
    assert counts[0] >= 1 and counts[1] >= 1 and counts[2] == counts[3]
    # The fork's copies share their contents with the imported parent's messages, as the
    # original's share the original parent's.
    assert await sync_to_async(_sharing)(imported.pk) == await sync_to_async(_sharing)(original) != []

    pairs = await sync_to_async(id_pairs)(original, imported.pk)
    # `recall` finds the imported session's archived past as it finds the original's.
    recalled = await sync_to_async(_recalled)(imported.pk)
    assert recalled and normalised(recalled, pairs) == normalised(
        await sync_to_async(_recalled)(original), {}
    )
    before = await next_request(connect, token, original)
    after = await next_request(connect, importer, imported.pk)
    # The imported session names its own rows: its observation's id (in view, in the newest
    # tool result) is the one its tool call gets there, and nothing else differs.
    newest = await sync_to_async(_newest_observation)(imported.pk)
    assert newest in json.dumps(after) and newest not in json.dumps(before)
    assert pairs[newest] in json.dumps(before)
    assert normalised(after, pairs) == normalised(before, {})
    # ...and it runs a turn of its own.
    frames_after = await next_request(connect, importer, imported.pk, "echo and on")
    assert frames_after["messages"][-1]["content"][-1]["text"] == "echo and on"


def _newest_observation(session_id: uuid.UUID) -> str:
    from memory_app.observations.models import Observation

    return (
        Observation.objects.filter(session_id=session_id)
        .order_by("-created_at")
        .values_list("id", flat=True)[0]
    )


def _recalled(session_id: uuid.UUID, query: str = "request palimpsest EMEA row") -> list[tuple]:
    from sessions_app.recall_selectors import recall_search

    session = AgentSession.objects.get(pk=session_id)
    hits = recall_search(query=query, session=session, limit=20)
    return [(hit.role, hit.text, hit.epoch, hit.kind) for hit in hits]


def _sharing(root: uuid.UUID) -> list[tuple[int, int, int]]:
    """Each fork copy of the tree: (its session's depth, its position, its holder's position), the
    holder being a message of the root."""
    from sessions_app.models import Message

    copies = Message.objects.filter(session__root_session_id=root, content_source__isnull=False)
    assert not copies.exclude(content_source__session_id=root).exists()
    return sorted(copies.values_list("session__depth", "position", "content_source__position"))


async def test_a_fork_exported_without_its_parent_holds_its_contents_and_recall_finds_them(
    connect, make_token, echo_tool
):
    from sessions_app.models import Message

    token = await make_token("exporter")
    client = await connect(token)
    session = await client.create(system_prompt="You help.")
    await chat(client, "remember: the Q3 gap is in EMEA", session["id"])
    await chat(client, "fork Check the APAC rows.", session["id"])
    await client.close()
    fork = await sync_to_async(
        lambda: AgentSession.objects.get(parent_session_id=session["id"], spawn_mode="fork")
    )()
    text = await sync_to_async(export_text)(fork.pk)
    document = json.loads(text)
    assert any(m["content_source"] for m in document["session"]["messages"])
    imported = await sync_to_async(import_text)(text, "exporter")
    assert imported.parent_session_id is None and imported.depth == 0  # a root now
    original = await sync_to_async(
        lambda: [(m.position, m.content_source_id is not None) for m in Message.objects.filter(session=fork)]
    )()
    copies = await sync_to_async(
        lambda: list(Message.objects.filter(session=imported, content_source__isnull=False))
    )()
    assert copies == [] and any(shared for _, shared in original)
    # Its copies hold their contents, and have search documents of their own.
    documents = await sync_to_async(lambda: RecallDocument.objects.filter(session_id=imported.pk).count())()
    assert (
        documents > await sync_to_async(lambda: RecallDocument.objects.filter(session_id=fork.pk).count())()
    )


def test_the_export_reads_page_by_page_whatever_the_number_of_rows(django_assert_max_num_queries):
    """Keyset pages of PAGE_ROWS: no query per row (a message's content comes with its page)."""
    from sessions_app import services
    from sessions_app.engine import sessions
    from sessions_app.models import Message

    token, _ = services.agent_token_create(name="pages")
    session = sessions.session_create(owner=token, title="pages")
    Message.objects.bulk_create(
        Message(session=session, position=p, role="user", content=[{"type": "text", "text": f"m{p}"}])
        for p in range(1000)
    )
    AgentSession.objects.filter(pk=session.pk).update(next_position=1000)
    with django_assert_max_num_queries(40):
        document = json.loads(export_text(session.pk))
    assert [m["position"] for m in document["session"]["messages"]] == list(range(1000))
    assert document["session"]["messages"][999]["content"] == [{"type": "text", "text": "m999"}]


async def test_a_session_exported_while_its_turn_waits_imports_idle_with_a_valid_history(
    strict_fake, make_token
):
    """The export is not a snapshot: caught while a turn waits for an approval, its last step's
    call has no result. The copy's turn ends (error) and the call gets an error result, so the
    copy's next turn makes a request the real API takes (the strict fake refuses an unanswered
    tool_use), and its events show the turn's end."""
    import asyncio

    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.engine.features import features
    from sessions_app.models import SessionEvent, ToolCall, Turn
    from sessions_app.services.turns import IMPORTED_STOPPED_MESSAGE, INTERRUPTED_TOOL_RESULT
    from tests.fake_anthropic import text, tool_use

    fake = strict_fake()
    await make_token("importer")
    session = await asyncio.to_thread(
        engine_sessions.session_create,
        owner=None,
        title="waits",
        model="claude-sonnet-4-6",
        settings={"approvals": {"count_words": "always_ask"}},
        reserved_tool_names=features().tool_names(),
    )
    fake.enqueue(tool_use("count_words", {"text": "a b"}))
    turn_id = await runner.turn_start(session_id=session.pk, content="count these")
    asked = SessionEvent.objects.filter(session_id=session.pk, type="tool.approval_requested")
    while not await asked.aexists():
        await asyncio.sleep(0.01)
    text_document = await sync_to_async(export_text)(session.pk)
    await runner.EngineTurns().cancel(session_id=session.pk, turn_id=turn_id, wait_seconds=10)

    imported = await sync_to_async(import_text)(text_document, "importer")
    assert (imported.status, imported.current_turn_id) == ("idle", None)
    (turn,) = [t async for t in Turn.objects.filter(session_id=imported.pk)]
    assert (turn.stop_reason, turn.error) == ("error", IMPORTED_STOPPED_MESSAGE) and turn.ended_at
    call = await ToolCall.objects.aget(session_id=imported.pk)
    assert (call.status, call.is_error, call.result) == ("done", True, INTERRUPTED_TOOL_RESULT)
    types = [
        e
        async for e in SessionEvent.objects.filter(session_id=imported.pk)
        .order_by("seq")
        .values_list("type", flat=True)
    ]
    assert types[-2:] == ["tool.approval_requested", "turn.completed"]

    fake.enqueue(text("Counted nothing: the call was interrupted."))
    next_turn = await runner.turn_start(session_id=imported.pk, content="go on")
    assert await turn_stop_reason(next_turn) == "end_turn"
    last = fake.requests[-1].body["messages"]
    assert last[-1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": call.tool_use_id,
        "content": INTERRUPTED_TOOL_RESULT,
        "is_error": True,
    }
