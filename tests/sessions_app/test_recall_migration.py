"""The migrations that build the `recall` index for what is already stored
(sessions_app 0018, memory_app 0009): every message holding its content (a fork's copies not,
a carried copy in its original's place), every archive's summary, every offloaded observation
still kept; searchable at once; undone, the documents go."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from sessions_app.models import AgentSession, RecallDocument
from sessions_app.recall_selectors import recall_search

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vendor")]

BEFORE = [("sessions_app", "0018_agent_tools"), ("memory_app", "0008_notepad_revision_chars")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def migrated_back() -> Iterator[Any]:
    apps = _migrate(BEFORE)
    yield apps
    _migrate(_latest())


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


def _stored_before(apps: Any) -> dict[str, Any]:
    session_model = apps.get_model("sessions_app", "AgentSession")
    message_model = apps.get_model("sessions_app", "Message")
    archive_model = apps.get_model("sessions_app", "Archive")
    turn_model = apps.get_model("sessions_app", "Turn")
    observation_model = apps.get_model("memory_app", "Observation")
    chunk_model = apps.get_model("memory_app", "ObservationChunk")
    session = session_model.objects.create(model="m", context_window=1000, epoch=1, title="old")
    fork = session_model.objects.create(
        model="m", context_window=1000, parent_session=session, root_session=session, depth=1
    )
    turn = turn_model.objects.create(session=session)
    rows = [
        (0, "user", text("the lighthouse keeper is Morag"), {}),
        (1, "assistant", text("noted"), {}),
        (2, "user", text("carried lighthouse request"), {}),
        (3, "user", text("[Summary]"), {"type": "compact"}),
        (4, "user", text("carried lighthouse request"), {"type": "carried", "from_position": 2}),
    ]
    made = {}
    for position, role, content, metadata in rows:
        made[position] = message_model.objects.create(
            session=session,
            position=position,
            epoch=0 if position < 3 else 1,
            role=role,
            content=content,
            metadata=metadata,
            turn=turn,
        )
    message_model.objects.create(
        session=fork, position=0, role="user", content=None, content_source_id=made[0].pk
    )
    archive_model.objects.create(
        session=session,
        epoch=0,
        summary="They met the lighthouse keeper.",
        message_count=3,
        tokens_before=10,
        tokens_after=5,
    )
    observation = observation_model.objects.create(
        id="1234567890123456",
        session=session,
        turn=turn,
        step=1,
        tool_name="fs_read",
        tool_use_id="toolu_1",
        kind="text",
        size_bytes=20,
        char_count=20,
        sha256="",
        chunk_size=10,
        summary="s",
        expires_at=timezone.now() + timedelta(days=1),
    )
    for index, piece in enumerate(["lighthouse ", "log line"]):
        chunk_model.objects.create(
            observation=observation, index=index, text=piece, start_char=0, start_byte=0
        )
    return {"session": session.pk, "fork": fork.pk, "observation": observation.pk}


def test_the_index_is_built_for_what_is_stored_and_undone_with_the_migration(migrated_back):
    stored = _stored_before(migrated_back)
    _migrate(_latest())
    docs = list(RecallDocument.objects.order_by("id").values_list("session_id", "epoch", "kind", "text"))
    session = stored["session"]
    assert sorted(docs, key=lambda d: d[3]) == sorted(
        [
            (session, 0, "message", "the lighthouse keeper is Morag"),
            (session, 0, "message", "noted"),
            (session, 1, "message", "carried lighthouse request"),  # moved to its copy
            (session, 0, "summary", "They met the lighthouse keeper."),
            (session, 0, "observation", "lighthouse log line"),
        ],
        key=lambda d: d[3],
    )
    caller = AgentSession.objects.get(pk=session)
    found = {hit.text for hit in recall_search(session=caller, query="lighthouse", limit=20)}
    assert found == {
        "the lighthouse keeper is Morag",
        "They met the lighthouse keeper.",
        "lighthouse log line",
    }
    _migrate(BEFORE)
    with connection.cursor() as cursor:
        tables = connection.introspection.get_table_list(cursor)
    assert not [t.name for t in tables if t.name.startswith("sessions_app_recalldocument")]
