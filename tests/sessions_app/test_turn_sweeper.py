"""Turns whose process died: once their lease ran out over a lease period ago they are closed
and announced (`turn_interrupted`, `turn.completed`), so a reconnecting client is not left
waiting; live turns and other leases are left alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app import announce, services, turn_sweeper
from sessions_app.models import AgentSession, SessionEvent, Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def announced(monkeypatch):
    frames: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: frames.append)
    return frames


def expire(session_id, seconds_ago: float) -> None:
    AgentSession.objects.filter(pk=session_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=seconds_ago)
    )


def events_of(session_id) -> list[tuple[str, dict]]:
    return list(
        SessionEvent.objects.filter(session_id=session_id).order_by("seq").values_list("type", "payload")
    )


def test_a_turn_whose_lease_ran_out_long_ago_is_closed_and_announced(announced):
    session = services.session_create(owner=None)
    turn = services.turn_begin(session_id=session.id, content="one")
    expire(session.id, 10)
    assert services.sessions_with_expired_lease(grace_seconds=5, limit=10) == [session.id]
    assert services.turn_expired_close(session_id=session.id, grace_seconds=5) is True
    closed = AgentSession.objects.get(pk=session.id)
    assert (closed.current_turn_id, closed.lease_expires_at, closed.status) == (None, None, "error")
    assert Turn.objects.get(pk=turn.id).stop_reason == "error"
    assert events_of(session.id)[-2:] == [
        ("error", {"code": "turn_interrupted", "message": services.turns.TURN_INTERRUPTED_MESSAGE}),
        ("turn.completed", {"turn_id": str(turn.id), "stop_reason": "error"}),
    ]
    # Closed once: a second sweep finds nothing, and the stalled turn's own end adds nothing.
    assert services.turn_expired_close(session_id=session.id, grace_seconds=5) is False
    services.turn_finish(session_id=session.id, turn_id=turn.id, stop_reason="end_turn", steps=1)
    assert [t for t, _ in events_of(session.id)].count("turn.completed") == 1
    # The next turn starts normally.
    services.turn_begin(session_id=session.id, content="two")


def test_a_lease_within_its_grace_or_alive_is_left_alone(announced):
    session = services.session_create(owner=None)
    services.turn_begin(session_id=session.id, content="one")
    assert services.turn_expired_close(session_id=session.id, grace_seconds=0) is False  # alive
    expire(session.id, 1)
    assert services.sessions_with_expired_lease(grace_seconds=5, limit=10) == []
    assert services.turn_expired_close(session_id=session.id, grace_seconds=5) is False
    assert AgentSession.objects.get(pk=session.id).status == "running"


def test_an_operator_compaction_whose_process_died_only_releases_the_lease(announced):
    session = services.session_create(owner=None)
    services.compaction_operator_begin(session_id=session.id)
    expire(session.id, 10)
    assert services.turn_expired_close(session_id=session.id, grace_seconds=5) is True
    assert AgentSession.objects.get(pk=session.id).current_turn_id is None
    assert [t for t, _ in events_of(session.id)] == ["session.status"]


async def test_the_sweep_closes_only_expired_turns(announced, settings):
    settings.PALIMPSEST_TURN_LEASE_SECONDS = 2
    dead, alive = [await sync_to_async(services.session_create)(owner=None) for _ in range(2)]
    for session in (dead, alive):
        await sync_to_async(services.turn_begin)(session_id=session.id, content="one")
    await sync_to_async(expire)(dead.id, 3)
    assert await turn_sweeper.turns_expired_sweep() == 1
    statuses = await sync_to_async(lambda: dict(AgentSession.objects.values_list("pk", "status")))()
    assert statuses == {dead.id: "error", alive.id: "running"}
