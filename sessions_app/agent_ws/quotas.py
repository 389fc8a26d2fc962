"""Per-token quotas on agent clients: frames per second, open connections (DESIGN.md, Security:
they stop runaway clients). Sessions created per minute are counted in the database, with the
sub-sessions a token's turns spawn (`services.session_quota_check`).

Counters are kept per server process (with N daphne processes a token may get up to N times a
limit); the limits come from settings (`PALIMPSEST_QUOTA_*`, 0 switches one off) and their
defaults let one token open 500 sessions at once. Rates are token buckets: a token may spend its
whole per-period allowance at once, and it refills evenly over the period. A token's bucket is
forgotten once it would be full again (after one period untouched) and at most
QUOTA_TRACKED_TOKENS tokens are tracked per limit, so the counters' memory is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from sessions_app.common.caches import ExpiringMap

QUOTA_TRACKED_TOKENS = 10_000
FRAMES_PERIOD_SECONDS = 1.0
# Closing code for a connection over its token's open-connection quota, or one that kept
# sending frames that were refused (PROTOCOL additions in docs/clients.md).
CLOSE_TOO_MANY_CONNECTIONS = 4429
# A connection may have PALIMPSEST_WS_REFUSALS_BEFORE_CLOSE refused frames at once, refilling
# evenly over this period; past that it is closed with CLOSE_TOO_MANY_CONNECTIONS.
REFUSALS_PERIOD_SECONDS = 10.0


# Why a frame was refused as it arrived (`AgentConsumer._frame_judge`, `intake.FrameIntake`).
REFUSED_RATE = "rate"
REFUSED_BACKLOG = "backlog"
REFUSED_CLOSING = "closing"


def frame_refusal_message(reason: str) -> str:
    """What a `rate_limited` answer says of a frame refused for `reason`."""
    if reason == REFUSED_RATE:
        limit = settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND
        return (
            f"too many frames: at most {limit} a second per token (per server process); this one was ignored"
        )
    return (
        f"too many frames waiting: at most {settings.PALIMPSEST_WS_BACKLOG_FRAMES} frames "
        f"({settings.PALIMPSEST_WS_BACKLOG_BYTES} bytes) of a connection wait to be handled; "
        "this one was ignored: wait for answers before sending more"
    )


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: `limit` events per `period_seconds`, all of them at once at most."""

    def __init__(
        self,
        *,
        period_seconds: float,
        maxsize: int = QUOTA_TRACKED_TOKENS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period_seconds = period_seconds
        self._clock = clock
        self._buckets: ExpiringMap[int, _Bucket] = ExpiringMap(
            maxsize=maxsize, ttl_seconds=period_seconds, clock=clock
        )

    def allow(self, key: int, *, limit: int) -> bool:
        """Spend one event of `key`'s allowance; False (nothing spent) when none is left."""
        if limit <= 0:
            return True
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(limit), updated=now)
        else:
            refill = (now - bucket.updated) * limit / self.period_seconds
            bucket = _Bucket(tokens=min(float(limit), bucket.tokens + refill), updated=now)
        allowed = bucket.tokens >= 1
        if allowed:
            bucket.tokens -= 1
        self._buckets.set(key, bucket)
        return allowed

    def __len__(self) -> int:
        return len(self._buckets)


_frames = RateLimiter(period_seconds=FRAMES_PERIOD_SECONDS)


def frame_allowed(*, token_id: int) -> bool:
    return _frames.allow(token_id, limit=settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND)


def connection_allowed(*, open_connections: int) -> bool:
    """Whether a token holding `open_connections` in this process (this one included) may."""
    limit = settings.PALIMPSEST_QUOTA_CONNECTIONS
    return limit <= 0 or open_connections <= limit


def quotas_reset() -> None:
    """Forget every counter (tests)."""
    global _frames
    _frames = RateLimiter(period_seconds=FRAMES_PERIOD_SECONDS)
