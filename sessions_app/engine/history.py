"""Each session's prepared history (`context.PreparedHistory`), kept between steps and turns so
that a turn reads only the messages written since (by this process or another). Messages are
never changed once stored, so a cached history is right as long as its epoch is the session's.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from sessions_app.engine.context import PreparedHistory, StoredMessage
from sessions_app.models import Message

HISTORY_CACHE_SESSIONS = 64
_histories: OrderedDict[uuid.UUID, PreparedHistory] = OrderedDict()


def history_remember(session_id: uuid.UUID, history: PreparedHistory) -> None:
    _histories[session_id] = history
    _histories.move_to_end(session_id)
    while len(_histories) > HISTORY_CACHE_SESSIONS:
        _histories.popitem(last=False)


def history_for(session_id: uuid.UUID, epoch: int) -> PreparedHistory:
    """The epoch's history, from the cache plus what was stored since (runs in the DB thread)."""
    history = _histories.get(session_id)
    if history is None or history.epoch != epoch:
        history = PreparedHistory(epoch=epoch)
    newer = Message.objects.filter(session_id=session_id, epoch=epoch, position__gt=history.last_position)
    for m in newer.only("position", "role", "content", "token_estimate").order_by("position"):
        history.append(StoredMessage(m.position, m.role, m.content, m.token_estimate))
    history_remember(session_id, history)
    return history
