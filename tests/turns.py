"""Waiting for a turn the tests started, without the race of `runner.turn_wait`, which answers None
once the turn has already ended (it knows only this process's running turns)."""

from __future__ import annotations

import uuid

from sessions_app.engine import runner
from sessions_app.models import Turn


async def turn_stop_reason(turn_id: uuid.UUID) -> str:
    """The turn's stop reason once it has ended, read from its row."""
    await runner.turn_wait(turn_id)
    turn = await Turn.objects.aget(pk=turn_id)
    assert turn.ended_at is not None, f"turn {turn_id} has not ended"
    return turn.stop_reason
