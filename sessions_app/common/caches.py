"""Per-process maps whose memory is bounded: a client can add keys, never without limit.

`LRUCache` keeps at most `maxsize` entries, dropping the least recently used. `ExpiringMap`
also forgets entries not touched for `ttl_seconds` (swept as it is used), so counters of clients
that went away do not stay. `SizedLRUCache` is bounded in bytes as well as in entries, for
entries whose size varies by orders of magnitude (a session's history, its last request). All
are plain, single-threaded structures: each process's event loop owns its own, or a caller
holds a lock around them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def set(self, key: K, value: V) -> bool:
        """Keep `value` as the most recently used entry; whether it was kept (always, here)."""
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)
        return True

    def pop(self, key: K) -> V | None:
        return self._data.pop(key, None)

    def clear(self) -> None:
        self._data.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


class ExpiringMap(Generic[K, V]):
    """An `LRUCache` whose entries also expire `ttl_seconds` after they were last touched."""

    def __init__(self, *, maxsize: int, ttl_seconds: float, clock: Callable[[], float] = time.monotonic):
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._data: LRUCache[K, tuple[float, V]] = LRUCache(maxsize)

    def get(self, key: K) -> V | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        touched, value = entry
        if self._clock() - touched > self.ttl_seconds:
            self._data.pop(key)
            return None
        return value

    def set(self, key: K, value: V) -> None:
        self._data.set(key, (self._clock(), value))
        self._sweep()

    def _sweep(self) -> None:
        # The least recently touched entries come first: drop expired ones until a live one.
        now = self._clock()
        data = self._data._data
        while data:
            key, (touched, _) = next(iter(data.items()))
            if now - touched <= self.ttl_seconds:
                return
            data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class SizedLRUCache(LRUCache[K, V]):
    """An LRU bounded by entries and by bytes: after a `set`, the entries' sizes add up to at
    most `max_bytes` (the least recently used go first), and a value bigger than `max_bytes` on
    its own is not kept at all (the key's older value is dropped too).

    Each value is weighed (`size_of`) when it is set, and a running total kept: a `set` costs
    O(1) besides what it drops. (It weighed every entry at each `set` before: with 500 sessions
    running, the histories' cache summed 500 sizes at every turn.)

    A value may grow while it is cached (a prepared history that a running turn appends to).
    Its owner sets it again once it has grown (the engine does at a turn's end), which weighs it
    anew; and, unless `fixed_sizes` (values that never change size while cached, such as bytes),
    every `maxsize` sets all entries are weighed again (one `size_of` a set, amortized), so a
    value that grew and was not set again is counted as it is now within `maxsize` sets.
    `max_bytes` may be a callable, read at each `set` (a setting that tests change).
    """

    def __init__(
        self,
        *,
        maxsize: int,
        max_bytes: int | Callable[[], int],
        size_of: Callable[[V], int],
        fixed_sizes: bool = False,
    ) -> None:
        super().__init__(maxsize)
        self._max_bytes = max_bytes
        self._size_of = size_of
        self._fixed_sizes = fixed_sizes
        self._sizes: dict[K, int] = {}
        self._total = 0
        self._sets_since_weighed = 0

    @property
    def max_bytes(self) -> int:
        return self._max_bytes() if callable(self._max_bytes) else self._max_bytes

    def set(self, key: K, value: V) -> bool:
        """Keep `value` as the most recently used entry; False when it is too big to keep."""
        budget = self.max_bytes
        size = self._size_of(value)
        if size > budget:
            self.pop(key)
            return False
        self.pop(key)
        self._data[key] = value
        self._sizes[key] = size
        self._total += size
        if not self._fixed_sizes:
            self._sets_since_weighed += 1
            if self._sets_since_weighed >= self.maxsize:
                self.weigh()
        while len(self._data) > self.maxsize or self._total > budget:
            oldest, _ = self._data.popitem(last=False)
            self._total -= self._sizes.pop(oldest)
        return True

    def weigh(self) -> None:
        """Weigh every entry again (values that grew since they were set)."""
        self._sizes = {key: self._size_of(value) for key, value in self._data.items()}
        self._total = sum(self._sizes.values())
        self._sets_since_weighed = 0

    def pop(self, key: K) -> V | None:
        value = self._data.pop(key, None)
        if key in self._sizes:
            self._total -= self._sizes.pop(key)
        return value

    def clear(self) -> None:
        super().clear()
        self._sizes.clear()
        self._total = 0

    def nbytes(self) -> int:
        """What the entries weighed when they were last weighed (by `size_of`)."""
        return self._total
