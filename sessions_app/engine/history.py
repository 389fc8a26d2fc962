"""Each session's prepared history (`context.PreparedHistory`), kept between steps and turns so
that a turn reads only the messages written since (by this process or another). Messages are
never changed once stored, so a cached history is right as long as its epoch is the session's;
masks (compaction's cheap tier) only ever grow within an epoch, and are read again the same way.
The features' history views (e.g. finished tasks, collapsed) are asked again at each load.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence

from sessions_app import selectors
from sessions_app.engine.context import HistoryView, PreparedHistory, StoredMessage
from sessions_app.models import MaskedResult

HISTORY_CACHE_SESSIONS = 64
_histories: OrderedDict[uuid.UUID, PreparedHistory] = OrderedDict()
# The engine's database threads (`db`) read and write the cache at once.
_histories_lock = threading.Lock()


def history_remember(session_id: uuid.UUID, history: PreparedHistory) -> None:
    with _histories_lock:
        _histories[session_id] = history
        _histories.move_to_end(session_id)
        while len(_histories) > HISTORY_CACHE_SESSIONS:
            _histories.popitem(last=False)


def history_forget(session_id: uuid.UUID) -> None:
    with _histories_lock:
        _histories.pop(session_id, None)


def history_for(session_id: uuid.UUID, epoch: int) -> PreparedHistory:
    """The epoch's history, from the cache plus what was stored since (runs in the DB thread)."""
    with _histories_lock:
        history = _histories.get(session_id)
    if history is None or history.epoch != epoch:
        masks = dict(
            MaskedResult.objects.filter(session_id=session_id, epoch=epoch).values_list(
                "tool_use_id", "placeholder"
            )
        )
        stored = [
            StoredMessage(m.position, m.role, m.content, m.token_estimate)
            for m in selectors.session_messages_after(session_id=session_id, epoch=epoch, after_position=-1)
        ]
        view = history_view(session_id, epoch, stored)
        history = PreparedHistory(stored, epoch=epoch, masks=masks, view=view)
        history_remember(session_id, history)
        return history
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
    history_view_refresh(session_id, history)
    history_remember(session_id, history)
    return history


def history_view(session_id: uuid.UUID, epoch: int, stored: Sequence[StoredMessage]) -> HistoryView:
    """The features' view of an epoch's stored messages (runs in the DB thread)."""
    from sessions_app.engine.features import features

    if not features().view_sources:
        return HistoryView()
    results = {b.get("tool_use_id", "") for m in stored for b in m.content if b.get("type") == "tool_result"}
    return features().history_view(session_id, epoch, results)


def history_view_refresh(session_id: uuid.UUID, history: PreparedHistory) -> bool:
    """Ask the features' views again and apply what changed (e.g. a task just ended): one pass
    over the prepared history, nothing unchanged encoded again. Runs in the DB thread."""
    from sessions_app.engine.features import features

    if not features().view_sources:
        return False
    return history.view_set(features().history_view(session_id, history.epoch, history.result_at.keys()))
