"""The one hook through which committed events reach watchers.

Services call `announce_on_commit(frame)` inside their transaction; the frame is handed to the
announcer only once the transaction commits, so nobody sees an event that was rolled back. The
announcer is named by `settings.PALIMPSEST_ANNOUNCER` (the channel layer in the running service)
and loaded on first use, which keeps services and the engine free of any Channels import.
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

Announcer = Callable[[dict], None]


@cache
def _announcer() -> Announcer:
    announcer: Announcer = import_string(settings.PALIMPSEST_ANNOUNCER)
    return announcer


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "PALIMPSEST_ANNOUNCER":
        _announcer.cache_clear()


setting_changed.connect(_reload)


def _announce(frame: dict) -> None:
    try:
        _announcer()(frame)
    except Exception:
        # The event is committed and replayable with since_seq; a failed broadcast must not
        # fail the write that produced it.
        logger.exception("announcing event %s seq %s failed", frame.get("type"), frame.get("seq"))


def announce_on_commit(frame: dict) -> None:
    transaction.on_commit(partial(_announce, frame))
