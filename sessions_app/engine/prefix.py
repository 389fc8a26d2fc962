"""The stable prefix: how much of each request is byte-identical to the start of the session's
previous request (what prompt caching can reuse), measured per call and shown by the dashboard.

Each session's previous request is kept whole: the common start is exact to the byte, and where
two requests part is not known in advance (a notepad changed early in the system prompt, or the
breakpoint moved off the last message near the end), so no part of it can be left out.
Digests of blocks would find the block where they part but not the byte. Memory is bounded
instead: at most PREFIX_CACHE_SESSIONS sessions and `PALIMPSEST_PREFIX_CACHE_BYTES` bytes (an
LRU); a request bigger than the budget is not kept, and the session's next call then measures
a stable prefix of 0, as after any eviction.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from sessions_app.common.caches import SizedLRUCache

# As the histories' (`history.HISTORY_CACHE_SESSIONS`): a session pushed out pays for its next
# request's whole hash and measures no stable prefix; the byte budget bounds the memory.
PREFIX_CACHE_SESSIONS = 1024


def _prefix_cache_bytes() -> int:
    return int(settings.PALIMPSEST_PREFIX_CACHE_BYTES)


# The request's SHA-256 (its record's `request_sha256`) is taken up where the stable prefix
# ends: the states of the previous request's hash every DIGEST_CHECKPOINT_BYTES are kept, and
# the new request's hash starts from the last one inside the common start. A long session's
# request (megabytes at 10,000 messages) repeats all but its last few messages: a quarter of a
# megabyte or so is hashed instead of all of it.
DIGEST_CHECKPOINT_BYTES = 256 * 1024


@dataclass
class _Previous:
    encoded: bytes
    # (offset, the SHA-256 state after encoded[:offset]): every DIGEST_CHECKPOINT_BYTES. Never
    # updated in place: a state is copied before it hashes more.
    checkpoints: list[tuple[int, Any]] = field(default_factory=list)


def _size_of(previous: _Previous) -> int:
    return len(previous.encoded)


# Runs in the event loop only (`TurnRunner._call_model`); `RequestMark.digest` may run in a
# thread and touches nothing of it.
_last_request: SizedLRUCache[uuid.UUID, _Previous] = SizedLRUCache(
    maxsize=PREFIX_CACHE_SESSIONS, max_bytes=_prefix_cache_bytes, size_of=_size_of, fixed_sizes=True
)


PREFIX_COMPARE_BLOCK = 65536


def common_prefix_length(a: bytes, b: bytes) -> int:
    """Length of the common start of two requests: compare 64 KiB blocks (memcmp, through
    `startswith` on views of `a`: no copies), then binary-search inside the first block that
    differs. Linear in the prefix: a tenth of a millisecond for a 3 MB request."""
    limit = min(len(a), len(b))
    view = memoryview(a)
    start = 0
    while start < limit:
        end = min(start + PREFIX_COMPARE_BLOCK, limit)
        if not b.startswith(view[start:end], start):
            low, high = start, end - 1
            while low < high:
                mid = (low + high + 1) // 2
                if b.startswith(view[start:mid], start):
                    low = mid
                else:
                    high = mid - 1
            return low
        start = end
    return limit


@dataclass
class RequestMark:
    """A request measured against the session's previous one: its stable prefix, and where its
    hash takes up (`digest`)."""

    session_id: uuid.UUID
    encoded: bytes
    stable_prefix: int
    # Hashing goes on from here, from `state` (the hash of encoded[:start], a copy of its own).
    start: int
    state: Any
    # The previous request's checkpoints that hold for this one too (inside the common start).
    kept: list[tuple[int, Any]]

    @property
    def to_hash(self) -> int:
        """How many bytes `digest` hashes."""
        return len(self.encoded) - self.start

    def digest(self) -> tuple[str, list[tuple[int, Any]]]:
        """The SHA-256 (hex) of the whole request, and its checkpoints (for `digest_remember`).
        Touches nothing shared: may run in a thread."""
        state, position, checkpoints = self.state, self.start, list(self.kept)
        view = memoryview(self.encoded)
        step = DIGEST_CHECKPOINT_BYTES
        mark = (position // step + 1) * step
        while mark <= len(self.encoded):
            state.update(view[position:mark])
            position = mark
            checkpoints.append((position, state.copy()))
            mark += step
        state.update(view[position:])
        return state.hexdigest(), checkpoints


def request_mark(session_id: uuid.UUID, encoded: bytes) -> RequestMark:
    """Remember `encoded` as the session's latest request; measure its common start with the
    previous one, and say where its hash takes up."""
    previous = _last_request.get(session_id)
    common = common_prefix_length(previous.encoded, encoded) if previous is not None else 0
    kept = [
        (offset, state) for offset, state in (previous.checkpoints if previous else ()) if offset <= common
    ]
    start, state = kept[-1] if kept else (0, hashlib.sha256())
    _last_request.set(session_id, _Previous(encoded, kept))
    return RequestMark(session_id, encoded, common, start, state.copy(), kept)


def digest_remember(mark: RequestMark, checkpoints: list[tuple[int, Any]]) -> None:
    """Keep the checkpoints of `mark`'s hash for the session's next request (unless a newer
    request, or an eviction, came in between)."""
    previous = _last_request.get(mark.session_id)
    if previous is not None and previous.encoded is mark.encoded:
        previous.checkpoints = checkpoints


def stable_prefix_bytes(session_id: uuid.UUID, encoded: bytes) -> int:
    """Remember `encoded` as the session's latest request; return its common start with the
    previous one."""
    return request_mark(session_id, encoded).stable_prefix
