"""What operators see of task scoping (`FEATURE.dashboard`): the context gauge shows the history
that finished tasks keep out of requests."""

from __future__ import annotations

import uuid

from memory_app.tasks.selectors import tasks_tokens_saved
from sessions_app.engine.contract import FeatureDashboard, HistorySaving


def tokens_collapsed(session_id: uuid.UUID, epoch: int) -> int:
    return tasks_tokens_saved(session_id=session_id, epoch=epoch)


DASHBOARD = FeatureDashboard(
    history_saving=HistorySaving(label="Collapsed by finished tasks (not sent)", tokens=tokens_collapsed)
)
