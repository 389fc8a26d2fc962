"""Each session's prepared history (`context.PreparedHistory`), kept between steps and turns so
that a turn reads only the messages written since (by this process or another). Messages are
never changed once stored, so a cached history is right as long as its epoch is the session's;
masks (compaction's cheap tier) only ever grow within an epoch, and are read again the same way.
The features' history views (e.g. finished tasks, collapsed) are asked again at each load.

The cache is bounded by sessions (HISTORY_CACHE_SESSIONS) and by bytes
(`PALIMPSEST_HISTORY_CACHE_BYTES`, by each history's running `nbytes`): the least recently used
histories go first, and a history bigger than the whole budget is not kept (its next turn reads
it from the database again). A running turn holds its own history (`TurnRunner.history`), so
dropping one here only drops the cache's reference.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

from django.conf import settings

from sessions_app import selectors
from sessions_app.common.caches import SizedLRUCache
from sessions_app.engine.context import PreparedHistory, StoredMessage
from sessions_app.engine.contract import HistoryView
from sessions_app.engine.feature_set import FeatureSet
from sessions_app.fastpath.rows import count_where, values_where
from sessions_app.models import MaskedResult

# A process runs hundreds of sessions at once: each one's next turn should find
# its history here, not read it all again. The byte budget is what bounds the memory.
HISTORY_CACHE_SESSIONS = 1024


def _history_cache_bytes() -> int:
    return int(settings.PALIMPSEST_HISTORY_CACHE_BYTES)


_histories: SizedLRUCache[uuid.UUID, PreparedHistory] = SizedLRUCache(
    maxsize=HISTORY_CACHE_SESSIONS, max_bytes=_history_cache_bytes, size_of=lambda h: h.nbytes
)
# The engine's database threads (`db`) read and write the cache at once.
_histories_lock = threading.Lock()


def history_remember(session_id: uuid.UUID, history: PreparedHistory) -> None:
    """Keep `history` as the session's (its size counted as it is now); it is left out when it
    alone weighs more than the budget."""
    with _histories_lock:
        _histories.set(session_id, history)


def history_forget(session_id: uuid.UUID) -> None:
    with _histories_lock:
        _histories.pop(session_id)


def history_for(
    session_id: uuid.UUID, epoch: int, *, feature_set: FeatureSet, newest: StoredMessage | None = None
) -> PreparedHistory:
    """The epoch's history, from the cache plus what was stored since (runs in the DB thread).

    `newest`: the epoch's newest message, just stored by the caller (a turn's start, its user
    message), when nothing else can have been stored after it. A cached history that ends just
    before it misses only that message: it is added without reading the messages or counting
    the masks again. Only a turn writes masks, under its lease, after its own user message: a
    mask stored since the history was cached comes with a message stored since, and then the
    history does not end just before `newest`."""
    with _histories_lock:
        history = _histories.get(session_id)
    if (
        newest is not None
        and history is not None
        and history.epoch == epoch
        and history.last_position == newest.position - 1
    ):
        history.append(newest)
        history_view_refresh(feature_set, session_id, history)
        history_remember(session_id, history)
        return history
    if history is None or history.epoch != epoch:
        masks = dict(
            values_where(MaskedResult, ("tool_use_id", "placeholder"), MASKS_OF_EPOCH, (session_id, epoch))
        )
        stored = [
            StoredMessage(m.position, m.role, m.content, m.token_estimate)
            for m in selectors.session_messages_after(session_id=session_id, epoch=epoch, after_position=-1)
        ]
        view = history_view(feature_set, session_id, epoch, stored)
        history = PreparedHistory(stored, epoch=epoch, masks=masks, view=view)
        history_remember(session_id, history)
        return history
    _masks_catch_up(session_id, history)
    newer = selectors.session_messages_after(
        session_id=session_id, epoch=epoch, after_position=history.last_position
    )
    for m in newer:
        history.append(StoredMessage(m.position, m.role, m.content, m.token_estimate))
    history_view_refresh(feature_set, session_id, history)
    history_remember(session_id, history)
    return history


MASKS_OF_EPOCH = (("session_id", "="), ("epoch", "="))


def _masks_catch_up(session_id: uuid.UUID, history: PreparedHistory) -> None:
    """Apply the masks written by another process since `history` was cached. A history holds
    only masks already stored (this process masks after the write commits), a tool result is
    masked at most once per epoch (a unique constraint) and masks are never removed within an
    epoch: so the same count means the same masks, and the usual turn reads one number."""
    params = (session_id, history.epoch)
    if count_where(MaskedResult, MASKS_OF_EPOCH, params) == len(history.masks):
        return
    for tool_use_id, placeholder in values_where(
        MaskedResult, ("tool_use_id", "placeholder"), MASKS_OF_EPOCH, params
    ):
        if tool_use_id in history.masks:
            continue
        if tool_use_id in history.result_at:
            history.mask(tool_use_id, placeholder)
        else:
            history.masks[tool_use_id] = placeholder


def history_view(
    feature_set: FeatureSet, session_id: uuid.UUID, epoch: int, stored: Sequence[StoredMessage]
) -> HistoryView:
    """The features' view of an epoch's stored messages (runs in the DB thread)."""
    if not feature_set.view_sources:
        return HistoryView()
    results = {b.get("tool_use_id", "") for m in stored for b in m.content if b.get("type") == "tool_result"}
    return feature_set.history_view(session_id, epoch, results)


def history_view_refresh(feature_set: FeatureSet, session_id: uuid.UUID, history: PreparedHistory) -> bool:
    """Ask the features' views again and apply what changed (e.g. a task just ended): one pass
    over the prepared history, nothing unchanged encoded again. Runs in the DB thread."""
    if not feature_set.view_sources:
        return False
    return history.view_set(feature_set.history_view(session_id, history.epoch, history.result_at.keys()))
