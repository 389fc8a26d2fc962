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

    `size_of` is asked at each `set` for every entry, not remembered: a value may grow while it
    is cached (a prepared history that a running turn appends to), and the budget is checked
    against what the entries weigh now. So `size_of` must be cheap (a running total the value
    keeps, or `len` of bytes); the cost of a `set` is O(entries), which `maxsize` bounds.
    With `fixed_sizes` (values that never change size while cached, such as bytes) each size is
    asked once and a running total kept: a `set` costs O(1) besides what it drops (a cache of
    256 requests was summed whole at every model call).
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
        self._sizes: dict[K, int] | None = {} if fixed_sizes else None
        self._total = 0

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
        if self._sizes is None:
            super().set(key, value)
            total = self.nbytes()
            while total > budget:
                _, dropped = self._data.popitem(last=False)
                total -= self._size_of(dropped)
            return True
        self.pop(key)
        self._data[key] = value
        self._sizes[key] = size
        self._total += size
        while len(self._data) > self.maxsize or self._total > budget:
            oldest, _ = self._data.popitem(last=False)
            self._total -= self._sizes.pop(oldest)
        return True

    def pop(self, key: K) -> V | None:
        value = self._data.pop(key, None)
        if self._sizes is not None and key in self._sizes:
            self._total -= self._sizes.pop(key)
        return value

    def clear(self) -> None:
        super().clear()
        if self._sizes is not None:
            self._sizes.clear()
            self._total = 0

    def nbytes(self) -> int:
        """What the entries weigh now (by `size_of`)."""
        if self._sizes is not None:
            return self._total
        return sum(self._size_of(v) for v in self._data.values())
