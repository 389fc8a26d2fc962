"""The session selectors the engine reads through."""

from __future__ import annotations

import pytest

from sessions_app import selectors
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import Message

pytestmark = pytest.mark.django_db


def test_messages_after_a_position_are_the_epochs_newer_ones_in_order() -> None:
    session = engine_sessions.session_create(owner=None)
    for position, epoch in [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]:
        Message.objects.create(
            session=session,
            position=position,
            epoch=epoch,
            role="user",
            content=[{"type": "text", "text": str(position)}],
            token_estimate=1,
        )
    newer = selectors.session_messages_after(session_id=session.pk, epoch=1, after_position=2)
    assert [m.position for m in newer] == [3, 4]
    assert selectors.session_get(session_id=session.pk) == session
