"""Streamed text as `assistant.delta` events, coalesced."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

from sessions_app import services
from sessions_app.engine.db import db

DELTA_FLUSH_SECONDS = 0.05


class DeltaBuffer:
    """Coalesces streamed text into `assistant.delta` events at most every DELTA_FLUSH_SECONDS,
    and at the latest DELTA_FLUSH_SECONDS after a piece arrived, even when the model then stalls
    (a timer flushes what is waiting)."""

    def __init__(self, session_id: uuid.UUID, turn_id: uuid.UUID) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.parts: list[str] = []
        self.last_flush = time.monotonic()
        self.timer: asyncio.Task | None = None
        self.lock = asyncio.Lock()

    async def add(self, text: str) -> None:
        self.parts.append(text)
        waited = time.monotonic() - self.last_flush
        if waited >= DELTA_FLUSH_SECONDS:
            await self.flush()
        elif self.timer is None:
            self.timer = asyncio.create_task(self._flush_later(DELTA_FLUSH_SECONDS - waited))

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self.timer = None
        await self._emit()

    async def flush(self) -> None:
        """Send what is waiting now; the end of a call (no timer outlives it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        await self._emit()

    async def close(self) -> str:
        """The end of the call: the text not announced yet, for the caller to announce with the
        answer in one write (after any flush under way, so that deltas keep their order)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        async with self.lock:
            text, self.parts = "".join(self.parts), []
            return text

    async def _emit(self) -> None:
        # One at a time, so that deltas keep their order.
        async with self.lock:
            self.last_flush = time.monotonic()
            if self.parts:
                text, self.parts = "".join(self.parts), []
                # A turn ended or taken over elsewhere shows no more text; its runner finds out
                # at its next check and stops.
                with contextlib.suppress(services.TurnLeaseLost):
                    await db(services.turn_delta_emit)(
                        session_id=self.session_id, turn_id=self.turn_id, text=text
                    )
