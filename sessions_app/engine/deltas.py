"""Streamed text as `assistant.delta` events: coalesced per turn (`DeltaBuffer`), and written
together across turns (`delta_write`).

The deltas are the most frequent write there is: every streaming turn writes one at least every
DELTA_FLUSH_SECONDS. Written one transaction each, 500 sessions streaming at once were 10,000
transactions a second on SQLite's one writer, each with its own hop to a database thread. A
process's deltas go to one writer instead, which writes all that are waiting in one transaction
(`services.turn_deltas_emit`), the next batch gathering while one is written: one transaction
per batch, as many batches as the database can take, and a lone delta still written at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import weakref
from collections import deque

from sessions_app import services
from sessions_app.common.db import db

DELTA_FLUSH_SECONDS = 0.05
# A piece that comes after a pause (the call's first text, most often) waits this long for the
# rest of what the model sent with it: an answer that arrives whole (a short one, streamed in
# one burst) is then written once, with the step that stores it, not first as a delta of its own.
DELTA_GATHER_SECONDS = 0.005
# At most this many deltas in one transaction.
DELTA_BATCH_MAX = 256

# (session id, turn id, the lease's holder, text)
Delta = tuple[uuid.UUID, uuid.UUID, uuid.UUID, str]


class _DeltaWriter:
    """An event loop's deltas waiting to be written, and the one task writing them."""

    def __init__(self) -> None:
        self.waiting: deque[tuple[Delta, asyncio.Future[bool]]] = deque()
        self.writing = False

    async def write(self, delta: Delta) -> None:
        loop = asyncio.get_running_loop()
        written: asyncio.Future[bool] = loop.create_future()
        self.waiting.append((delta, written))
        if not self.writing:
            self.writing = True
            loop.create_task(self._drain(), name="palimpsest-deltas")
        if not await written:
            raise services.TurnLeaseLost

    async def _drain(self) -> None:
        try:
            while self.waiting:
                batch = [self.waiting.popleft() for _ in range(min(len(self.waiting), DELTA_BATCH_MAX))]
                try:
                    outcomes = await _batch_write([delta for delta, _ in batch])
                except BaseException:
                    # The writer itself is stopped (its event loop is closing): no turn is left
                    # waiting for a write that will not be reported.
                    for _, written in batch:
                        written.cancel()
                    raise
                for (_, written), outcome in zip(batch, outcomes, strict=True):
                    if written.done():  # its turn stopped waiting (a cancel)
                        continue
                    if isinstance(outcome, BaseException):
                        written.set_exception(outcome)
                    else:
                        written.set_result(outcome)
        finally:
            self.writing = False
            for _, written in self.waiting:
                written.cancel()
            self.waiting.clear()


async def _batch_write(deltas: list[Delta]) -> list[bool | BaseException]:
    """Write `deltas` in one transaction; if it fails, each on its own (one turn's failure, a
    database error that concerns one session, must not fail the others)."""
    try:
        return list(await db(services.turn_deltas_emit)(deltas=deltas))
    except Exception as exc:
        if len(deltas) == 1:
            return [exc]
    outcomes: list[bool | BaseException] = []
    for delta in deltas:
        try:
            outcomes += await db(services.turn_deltas_emit)(deltas=[delta])
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


_writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _DeltaWriter] = weakref.WeakKeyDictionary()


async def delta_write(session_id: uuid.UUID, turn_id: uuid.UUID, holder: uuid.UUID, text: str) -> None:
    """Write and announce one `assistant.delta` of `turn_id` (whose lease `holder` holds), with
    whatever other deltas of this process are waiting; `TurnLeaseLost` if the turn no longer
    holds its lease (nothing written)."""
    loop = asyncio.get_running_loop()
    writer = _writers.get(loop)
    if writer is None:
        writer = _writers[loop] = _DeltaWriter()
    await writer.write((session_id, turn_id, holder, text))


class DeltaBuffer:
    """Coalesces streamed text into `assistant.delta` events at most every DELTA_FLUSH_SECONDS
    (from the end of the last write), and at the latest DELTA_FLUSH_SECONDS after a piece
    arrived, even when the model then stalls (a timer flushes what is waiting). A piece that
    comes when the pace would allow a write at once waits DELTA_GATHER_SECONDS for what came
    with it: the rest of an answer that arrives whole goes with the answer (`close`), in the
    write that stores the step, rather than in a write of its own just before it."""

    def __init__(self, session_id: uuid.UUID, turn_id: uuid.UUID, holder: uuid.UUID) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.holder = holder
        self.parts: list[str] = []
        self.last_flush = time.monotonic()
        self.timer: asyncio.Task | None = None
        self.lock = asyncio.Lock()

    async def add(self, text: str) -> None:
        self.parts.append(text)
        if self.timer is not None:
            return
        delay = max(DELTA_FLUSH_SECONDS - (time.monotonic() - self.last_flush), DELTA_GATHER_SECONDS)
        if delay > 0:
            self.timer = asyncio.create_task(self._flush_later(delay))
        else:
            await self.flush()

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self.timer = None
        await self._emit(paced=True)

    async def flush(self) -> None:
        """Send what is waiting now; the end of a call (no timer outlives it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        await self._emit(paced=False)

    async def close(self) -> str:
        """The end of the call: the text not announced yet, for the caller to announce with the
        answer in one write (after any flush under way, so that deltas keep their order)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        async with self.lock:
            text, self.parts = "".join(self.parts), []
            return text

    async def _emit(self, *, paced: bool) -> None:
        # One at a time, so that deltas keep their order. The pace counts from the end of the
        # last write: text that came while a write waited on a busy database waits for the pace
        # from the end of that write (or goes with the answer, `close`), not in a write of its
        # own at once.
        async with self.lock:
            if not self.parts:
                return
            rest = DELTA_FLUSH_SECONDS - (time.monotonic() - self.last_flush)
            if paced and rest > 0:
                if self.timer is None:
                    self.timer = asyncio.create_task(self._flush_later(rest))
                return
            text, self.parts = "".join(self.parts), []
            # A turn ended or taken over elsewhere shows no more text; its runner finds out at
            # its next check and stops.
            with contextlib.suppress(services.TurnLeaseLost):
                await delta_write(self.session_id, self.turn_id, self.holder, text)
            self.last_flush = time.monotonic()
