"""The one hook through which committed events reach watchers.

Services call `announce_on_commit(*frames)` inside their transaction with the frames of one
write, in order; they are handed to the announcer together, only once the transaction commits,
so nobody sees an event that was rolled back (and a write's events cost one hand-over, not one
each). The announcer is named by `settings.PALIMPSEST_ANNOUNCER` (the channel layer in the
running service) and loaded on first use, which keeps services and the engine free of any
Channels import.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.db import transaction
from django.utils.module_loading import import_string

logger = logging.getLogger("palimpsest.announce")

# Called with the frames of one committed write, in their `seq` order.
Announcer = Callable[[list[dict]], None]


@cache
def _announcer() -> Announcer:
    announcer: Announcer = import_string(settings.PALIMPSEST_ANNOUNCER)
    return announcer


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "PALIMPSEST_ANNOUNCER":
        _announcer.cache_clear()


setting_changed.connect(_reload)


def _announce(frames: list[dict]) -> None:
    try:
        _announcer()(frames)
    except Exception:
        # The events are committed and replayable with since_seq; a failed broadcast must not
        # fail the write that produced them.
        logger.exception(
            "announcing events %s failed", ", ".join(f"{f.get('type')} seq {f.get('seq')}" for f in frames)
        )


def announce_on_commit(*frames: dict) -> None:
    if frames:
        transaction.on_commit(partial(_announce, list(frames)))
