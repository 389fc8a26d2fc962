"""The step path's SQL built once per shape (`fastpath/rows.py`) reads and writes rows exactly as
the ORM does: the same values come back through the ORM, and the ORM's rows come back the same
through it (keys, UUIDs, JSON, datetimes, a partial row)."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.fastpath import counters
from sessions_app.fastpath.rows import (
    count_where,
    exists_where_any,
    object_get,
    object_update,
    objects_insert,
    values_get,
    values_insert,
    values_where,
)
from sessions_app.models import AgentSession, Message, SessionEvent, Turn

pytestmark = pytest.mark.django_db


def test_rows_inserted_read_back_through_the_orm_as_they_were_given():
    session = engine_sessions.session_create(owner=None, model="scripted")
    turn = Turn(id=uuid.uuid4(), session_id=session.id)
    content = [{"type": "text", "text": 'é \u2603 "quoted"'}]
    objects_insert([turn])
    objects_insert(
        [
            Message(session_id=session.id, position=p, epoch=0, role="user", content=content, turn_id=turn.id)
            for p in range(3)
        ]
    )
    stored = list(Message.objects.filter(session_id=session.id).order_by("position"))
    assert [(m.position, m.content, m.turn_id) for m in stored] == [(p, content, turn.id) for p in range(3)]
    assert Turn.objects.get(pk=turn.id).started_at == turn.started_at
    objects_insert([])  # nothing to insert: no statement


def test_a_row_read_by_key_equals_the_orms_and_a_partial_row_defers_the_rest():
    session = engine_sessions.session_create(
        owner=None, model="scripted", settings={"notepad": {"enabled": True}}
    )
    AgentSession.objects.filter(pk=session.id).update(notepad="note", lease_expires_at=timezone.now())
    orm = AgentSession.objects.get(pk=session.id)
    raw = object_get(AgentSession, session.id, lock=False)
    assert {f.attname: getattr(raw, f.attname) for f in AgentSession._meta.concrete_fields} == {
        f.attname: getattr(orm, f.attname) for f in AgentSession._meta.concrete_fields
    }
    partial = object_get(AgentSession, str(session.id), only=("token_ratio", "id", "cancel_requested"))
    assert (partial.pk, partial.token_ratio, partial.cancel_requested) == (orm.pk, orm.token_ratio, False)
    assert partial.get_deferred_fields() >= {"notepad", "settings"}
    assert values_get(AgentSession, session.id, ("notepad_version", "notepad")) == (
        orm.notepad_version,
        "note",
    )
    with pytest.raises(AgentSession.DoesNotExist):
        object_get(AgentSession, uuid.uuid4())


def test_a_row_updated_by_key_reads_back_through_the_orm():
    session = engine_sessions.session_create(owner=None, model="scripted")
    turn = Turn.objects.create(session=session)
    when = timezone.now()
    assert object_update(Turn, turn.id, ended_at=when, stop_reason="end_turn", steps=2) == 1
    turn.refresh_from_db()
    assert (turn.ended_at, turn.stop_reason, turn.steps) == (when, "end_turn", 2)
    assert object_update(Turn, uuid.uuid4(), steps=1) == 0


def test_events_inserted_with_seqs_the_caller_allocated():
    session = engine_sessions.session_create(owner=None, model="scripted")
    last = counters.session_update(session.id, add={"last_seq": 2})["last_seq"]
    frames = services.events.events_insert(
        session_id=session.id, last_seq=last, events=[("a", {"x": 1}), ("b", {"é": ["✓", None]})]
    )
    stored = list(SessionEvent.objects.filter(session_id=session.id))
    assert [(e.seq, e.type, e.payload) for e in stored] == [(1, "a", {"x": 1}), (2, "b", {"é": ["✓", None]})]
    # The frames announced are the stored rows' own, built without model instances.
    assert frames == [e.as_frame() for e in stored]


def test_values_insert_stores_what_the_orm_stores():
    """`values_insert` (no model instances) and `objects_insert` send the same values."""
    session = engine_sessions.session_create(owner=None, model="scripted")
    at = timezone.now()
    values = {"session_id": session.id, "type": "t", "payload": {"k": [1, "ü"]}, "created_at": at}
    objects_insert([SessionEvent(seq=1, **values)])
    values_insert(SessionEvent, ("seq", *values), [(2, *values.values())])
    one, two = SessionEvent.objects.filter(session_id=session.id).order_by("seq")
    assert (one.session_id, one.type, one.payload, one.created_at) == (
        two.session_id,
        two.type,
        two.payload,
        two.created_at,
    )
    with pytest.raises(AssertionError):
        values_insert(SessionEvent, ("seq", "type"), [(3, "t")])  # every field must be named


def test_rows_selected_by_conditions_equal_the_orms():
    session = engine_sessions.session_create(owner=None, model="scripted")
    for position, epoch in [(0, 0), (1, 1), (2, 1), (3, 1)]:
        Message.objects.create(
            session=session, position=position, epoch=epoch, role="user", content=[{"t": position}]
        )
    names = ("position", "content", "created_at", "turn_id")
    raw = values_where(
        Message,
        names,
        (("session_id", "="), ("epoch", "="), ("position", ">")),
        (session.id, 1, 1),
        order_by="position",
    )
    orm = (
        Message.objects.filter(session=session, epoch=1, position__gt=1)
        .order_by("position")
        .values_list(*names)
    )
    assert raw == list(orm) and [r[0] for r in raw] == [2, 3]


def test_rows_limited_and_counted_equal_the_orms():
    session = engine_sessions.session_create(owner=None, model="scripted")
    for position in range(5):
        Message.objects.create(session=session, position=position, epoch=0, role="user", content=[])
    where = (("session_id", "="), ("position", ">="))
    first_two = values_where(Message, ("position",), where, (session.id, 1), order_by="position", limit=2)
    assert first_two == [(1,), (2,)]
    assert (
        count_where(Message, where, (session.id, 1))
        == Message.objects.filter(session=session, position__gte=1).count()
        == 4
    )
    assert count_where(Message, where, (uuid.uuid4(), 0)) == 0


def test_exists_where_any_equals_the_orms_or():
    from django.db.models import Q

    session = engine_sessions.session_create(owner=None, model="scripted")
    for position in range(3):
        Message.objects.create(session=session, position=position, epoch=position, role="user", content=[])
    by_epoch = (("session_id", "="), ("epoch", "="))
    by_position = (("session_id", "="), ("position", ">"))
    cases = [
        ((session.id, 9), (session.id, 1)),
        ((session.id, 1), (session.id, 9)),
        ((session.id, 9), (session.id, 9)),
    ]
    for epoch_params, position_params in cases:
        found = exists_where_any(Message, [(by_epoch, epoch_params), (by_position, position_params)])
        orm = Message.objects.filter(
            Q(session=session, epoch=epoch_params[1]) | Q(session=session, position__gt=position_params[1])
        ).exists()
        assert found == orm
    assert [exists_where_any(Message, [(by_epoch, p), (by_position, q)]) for p, q in cases] == [
        True,
        True,
        False,
    ]


def test_a_conditional_update_writes_only_while_the_row_matches():
    session = engine_sessions.session_create(owner=None)
    holder = uuid.uuid4()
    turn = services.turn_begin(session_id=session.id, content="go", holder=holder)
    before = AgentSession.objects.get(pk=session.id).last_seq
    lease = {"current_turn_id": turn.id, "lease_holder": holder}
    update_if = counters.session_update_if

    assert update_if(session.id, where=lease, add={"last_seq": 1}) == {"last_seq": before + 1}
    # Another holder, another turn, no lease at all, no such session: nothing is written.
    for where in (
        {**lease, "lease_holder": uuid.uuid4()},
        {**lease, "current_turn_id": uuid.uuid4()},
        {"current_turn_id": None},
    ):
        assert update_if(session.id, where=where, add={"last_seq": 1}) is None
    assert update_if(uuid.uuid4(), where=lease, add={"last_seq": 1}) is None
    assert AgentSession.objects.get(pk=session.id).last_seq == before + 1


def test_a_conditional_update_without_returning_reads_the_counters_back(monkeypatch):
    """SQLite before 3.35 has no UPDATE ... RETURNING: the update, then a read of the counters."""
    monkeypatch.setattr(counters, "returning_supported", lambda connection=None: False)
    session = engine_sessions.session_create(owner=None)
    before = AgentSession.objects.get(pk=session.id).last_seq
    assert counters.session_update_if(
        session.id, where={"current_turn_id": None}, add={"last_seq": 2}, assign={"title": "t"}
    ) == {"last_seq": before + 2}
    assert counters.session_update_if(session.id, where={"title": "other"}, add={"last_seq": 2}) is None
    row = AgentSession.objects.get(pk=session.id)
    assert (row.last_seq, row.title) == (before + 2, "t")
