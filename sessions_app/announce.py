"""The one hook through which committed events reach watchers.

Services call `announce_on_commit(frame)` inside their transaction; the frame is handed to the
announcer only once the transaction commits, so nobody sees an event that was rolled back. The
announcer is plugged in by the app config (the channel layer in the running service), which keeps
services and the engine free of any Channels import.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from django.db import transaction

logger = logging.getLogger("palimpsest.announce")

Announcer = Callable[[dict], None]


def _no_announcer(frame: dict) -> None:  # pragma: no cover - replaced in AppConfig.ready
    pass


_announcer: Announcer = _no_announcer


def set_announcer(announcer: Announcer) -> None:
    global _announcer
    _announcer = announcer


def _announce(frame: dict) -> None:
    try:
        _announcer(frame)
    except Exception:
        # The event is committed and replayable with since_seq; a failed broadcast must not
        # fail the write that produced it.
        logger.exception("announcing event %s seq %s failed", frame.get("type"), frame.get("seq"))


def announce_on_commit(frame: dict) -> None:
    transaction.on_commit(partial(_announce, frame))
