"""The session's counters are added to and read back in one statement (`UPDATE ... RETURNING`),
and stay gapless under concurrent writers, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from sessions_app.engine import sessions as engine_sessions
from sessions_app.fastpath.counters import session_counter_add
from sessions_app.models import AgentSession, Message, MessageRole
from sessions_app.services.messages import message_write


def _adds_and_assigns() -> None:
    session = engine_sessions.session_create(owner=None)
    other = engine_sessions.session_create(owner=None)
    when = timezone.now() + timedelta(days=1)
    with transaction.atomic():
        assert session_counter_add(session.id, "last_seq", 3) == 3
        assert session_counter_add(session.id, "last_seq", 2, last_activity_at=when) == 5
        assert session_counter_add(str(session.id), "next_position", 1) == 1  # an id as text too
    session.refresh_from_db()
    assert (session.last_seq, session.next_position, session.last_activity_at) == (5, 1, when)
    other.refresh_from_db()
    assert (other.last_seq, other.next_position) == (0, 0)  # only the session named


def _unknown_session_is_refused() -> None:
    before = list(AgentSession.objects.values_list("id", "last_seq"))
    with pytest.raises(AgentSession.DoesNotExist):
        session_counter_add(uuid.uuid4(), "last_seq", 1)
    assert list(AgentSession.objects.values_list("id", "last_seq")) == before


def _concurrent_messages_get_gapless_positions(writers: int, each: int) -> None:
    session = engine_sessions.session_create(owner=None)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(each):
                with transaction.atomic():
                    message_write(
                        session_id=session.id,
                        epoch=0,
                        role=MessageRole.USER,
                        content=[{"type": "text", "text": f"m{i}"}],
                        turn_id=None,
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    positions = sorted(Message.objects.filter(session=session).values_list("position", flat=True))
    assert positions == list(range(writers * each))
    session.refresh_from_db()
    assert session.next_position == writers * each


@pytest.mark.django_db(transaction=True)
def test_a_counter_is_added_to_and_read_back_with_other_fields_set():
    _adds_and_assigns()


@pytest.mark.django_db(transaction=True)
def test_an_unknown_session_is_refused_and_nothing_changes():
    _unknown_session_is_refused()


@pytest.mark.django_db(transaction=True)
def test_concurrent_message_writers_get_gapless_positions():
    _concurrent_messages_get_gapless_positions(writers=4, each=20)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_counters_on_postgresql():
    assert connection.vendor == "postgresql"
    _adds_and_assigns()
    _unknown_session_is_refused()
    _concurrent_messages_get_gapless_positions(writers=8, each=20)
