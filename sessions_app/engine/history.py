"""Each session's prepared history (`context.PreparedHistory`), kept between steps and turns so
that a turn reads only the messages written since (by this process or another). Messages are
never changed once stored, so a cached history is right as long as its epoch is the session's;
masks (compaction's cheap tier) only ever grow within an epoch, and are read again the same way.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from sessions_app import selectors
from sessions_app.engine.context import PreparedHistory, StoredMessage
from sessions_app.models import MaskedResult

HISTORY_CACHE_SESSIONS = 64
_histories: OrderedDict[uuid.UUID, PreparedHistory] = OrderedDict()


def history_remember(session_id: uuid.UUID, history: PreparedHistory) -> None:
    _histories[session_id] = history
    _histories.move_to_end(session_id)
    while len(_histories) > HISTORY_CACHE_SESSIONS:
        _histories.popitem(last=False)


def history_forget(session_id: uuid.UUID) -> None:
    _histories.pop(session_id, None)


def history_for(session_id: uuid.UUID, epoch: int) -> PreparedHistory:
    """The epoch's history, from the cache plus what was stored since (runs in the DB thread)."""
    history = _histories.get(session_id)
    if history is None or history.epoch != epoch:
        masks = dict(
            MaskedResult.objects.filter(session_id=session_id, epoch=epoch).values_list(
                "tool_use_id", "placeholder"
            )
        )
        history = PreparedHistory(epoch=epoch, masks=masks)
    else:
        # Masks written by another process since this history was cached.
        for tool_use_id, placeholder in (
            MaskedResult.objects.filter(session_id=session_id, epoch=epoch)
            .exclude(tool_use_id__in=list(history.masks))
            .values_list("tool_use_id", "placeholder")
        ):
            if tool_use_id in history.result_at:
                history.mask(tool_use_id, placeholder)
            else:
                history.masks[tool_use_id] = placeholder
    newer = selectors.session_messages_after(
        session_id=session_id, epoch=epoch, after_position=history.last_position
    )
    for m in newer:
        history.append(StoredMessage(m.position, m.role, m.content, m.token_estimate))
    history_remember(session_id, history)
    return history
