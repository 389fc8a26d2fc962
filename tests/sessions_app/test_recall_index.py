"""The `recall` index is written with what it indexes, by every path that stores text: each
message path (the user's message, the model's answer, tool results, a repaired turn's results),
a compaction's summary (its summary message and carried copies not twice), an offloaded
observation (a masked one not twice), a fork's copies (never, until one holds its own content);
and it goes with the session, on SQLite's FTS5 table too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory_app.observations import services as observation_services
from memory_app.observations.content import result_parts
from sessions_app import services
from sessions_app.common.recall_text import RECALL_TEXT_MAX_CHARS
from sessions_app.common.types import PlannedToolCall, ToolOutcome
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, Message, RecallDocument
from tests.sessions_app.recall_support import (
    call_data,
    compact,
    documents,
    exchange,
    fts_rows,
    session_make,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("vendor")]


def test_the_users_message_and_the_models_answer_are_indexed():
    session = session_make()
    exchange(session, "The launch code is walrus.", "Noted: walrus.")
    assert documents(session=session) == [
        ("message", "user", "The launch code is walrus."),
        ("message", "assistant", "Noted: walrus."),
    ]
    doc = RecallDocument.objects.filter(session=session).first()
    assert doc is not None and doc.message == Message.objects.get(session=session, position=0)


def test_a_tool_call_is_indexed_with_its_name_and_input_and_its_result_as_a_tool_message():
    session = session_make()
    turn = services.turn_begin(session_id=session.pk, content="look it up")
    services.assistant_step_store(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=0,
        content=[
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Zürich"}},
        ],
        call=call_data(),
        tool_calls=[PlannedToolCall("toolu_1", "lookup", {"city": "Zürich"}, "server")],
    )
    services.tool_results_store(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=0,
        outcomes=[ToolOutcome("toolu_1", "lookup", "14 degrees and windy", "14 degrees and windy", False)],
    )
    assert documents(session=session)[1:] == [
        ("message", "assistant", 'Looking.\nlookup {"city":"Zürich"}'),
        ("message", "tool", "14 degrees and windy"),
    ]


def test_the_results_a_repaired_turn_writes_are_indexed():
    session = session_make()
    first = services.turn_begin(session_id=session.pk, content="one")
    services.assistant_step_store(
        session_id=session.pk,
        turn_id=first.id,
        epoch=0,
        content=[{"type": "tool_use", "id": "toolu_lost", "name": "t", "input": {}}],
        call=call_data(),
        tool_calls=[],
    )
    AgentSession.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.turn_begin(session_id=session.pk, content="two")
    kinds = documents(session=session)
    assert kinds[2] == ("message", "tool", services.INTERRUPTED_TOOL_RESULT)
    assert kinds[3] == ("message", "user", "two")


def test_a_compaction_indexes_its_summary_once_and_moves_a_carried_messages_document_to_its_copy():
    session = session_make()
    exchange(session, "alpha", "beta")
    turn = services.turn_begin(session_id=session.pk, content="gamma")
    services.compaction_warning_store(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=0,
        estimated_tokens=10,
        threshold_tokens=5,
        texts=["The context is almost full."],
    )
    services.compaction_store(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=0,
        summary="They spoke of alpha and beta.",
        summary_message="[Summary]\nThey spoke of alpha and beta.",
        tokens_before=100,
        tokens_after=10,
        carry_positions=[2],
    )
    assert Message.objects.filter(session=session, epoch=1).count() == 2  # the summary, "gamma" carried
    assert documents(session=session) == [
        ("message", "user", "alpha"),
        ("message", "assistant", "beta"),
        ("message", "user", "gamma"),
        ("summary", "summary", "They spoke of alpha and beta."),
    ]
    assert RecallDocument.objects.get(kind="summary").epoch == 0
    # "gamma", in view again in the new epoch, is indexed there, as its copy.
    gamma = RecallDocument.objects.get(text="gamma")
    assert (gamma.epoch, gamma.message) == (1, Message.objects.get(session=session, epoch=1, position=5))


def test_a_turns_own_compaction_indexes_its_summary():
    session = session_make()
    turn = services.turn_begin(session_id=session.pk, content="start")
    services.compaction_turn_store(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=0,
        summary="The turn looked at the quarterly figures.",
        note="[Turn summary] The turn looked at the quarterly figures.",
        tokens_before=100,
        tokens_after=10,
        carry_before=[0],
        carry_after=[],
    )
    assert documents(session=session) == [
        ("message", "user", "start"),
        ("summary", "summary", "The turn looked at the quarterly figures."),
    ]


def test_a_long_text_is_indexed_by_its_first_characters():
    session = session_make()
    exchange(session, "x" * (RECALL_TEXT_MAX_CHARS + 50) + " tailword", "ok")
    text = RecallDocument.objects.filter(session=session).first().text  # type: ignore[union-attr]
    assert len(text) == RECALL_TEXT_MAX_CHARS and "tailword" not in text


def _observation(session: AgentSession, content: str, **kwargs):
    turn = services.turn_begin(session_id=session.pk, content="read it")
    return observation_services.observation_create(
        session_id=session.pk,
        turn_id=turn.id,
        step=1,
        tool_name="fs_read",
        tool_use_id="toolu_big",
        parts=result_parts(content),
        ttl_seconds=60,
        **kwargs,
    )


def test_an_offloaded_observation_is_indexed_and_forgotten_with_its_content():
    session = session_make()
    observation = _observation(session, "INFO fine\n" * 100 + "ERROR flux capacitor\n")
    doc = RecallDocument.objects.get(kind="observation")
    assert (doc.ref, doc.role, doc.epoch) == (observation.id, "tool", 0)
    assert "ERROR flux capacitor" in doc.text
    observation_services.observations_gc(now=timezone.now() + timedelta(seconds=120))
    assert not RecallDocument.objects.filter(kind="observation").exists()


def test_a_masked_result_is_not_indexed_twice():
    session = session_make()
    turn = services.turn_begin(session_id=session.pk, content="go")
    snapshot = SessionSnapshot.from_session(
        AgentSession.objects.get(pk=session.pk), defaults=features().default_settings
    )
    observation_services.MASKED_RESULT_STORE.store(
        session=snapshot, turn_id=turn.id, tool_use_id="toolu_m", tool_name="t", content="masked text " * 50
    )
    assert not RecallDocument.objects.filter(kind="observation").exists()


def test_a_forks_copies_share_their_sources_documents_until_the_source_is_deleted():
    parent = session_make()
    exchange(parent, "the password is swordfish", "understood")
    fork = session_make()
    services.messages_copy(
        source_session_id=parent.pk, positions=[0, 1], target_session_id=fork.pk, marker={}
    )
    assert Message.objects.filter(session=fork).count() == 2
    assert documents(session=fork) == []
    services.session_tree_delete(session_id=parent.pk)
    # The copies now hold their contents: they are indexed as the fork's.
    assert documents(session=fork) == [
        ("message", "user", "the password is swordfish"),
        ("message", "assistant", "understood"),
    ]


def test_deleting_a_session_deletes_its_documents_and_their_full_text_rows():
    session = session_make()
    other = session_make()
    exchange(session, "zebra crossing", "zebra noted")
    exchange(other, "zebra elsewhere", "ok")
    compact(session, "zebra summary")
    assert RecallDocument.objects.filter(session=session).count() == 3
    if connection.vendor == "sqlite":
        assert fts_rows("zebra") == 4
    services.session_tree_delete(session_id=session.pk)
    assert not RecallDocument.objects.filter(session_id=session.pk).exists()
    assert RecallDocument.objects.filter(session=other).count() == 2
    if connection.vendor == "sqlite":
        assert fts_rows("zebra") == 1
