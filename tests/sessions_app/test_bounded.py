"""Per-process maps with bounded memory."""

from __future__ import annotations

from sessions_app.bounded import ExpiringMap, LRUCache


def test_lru_cache_drops_the_least_recently_used_entry():
    cache: LRUCache[str, int] = LRUCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.set("c", 3)
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)
    assert len(cache) == 2


def test_expiring_map_forgets_entries_not_touched_within_the_ttl():
    now = [0.0]
    counters: ExpiringMap[str, int] = ExpiringMap(maxsize=100, ttl_seconds=10, clock=lambda: now[0])
    counters.set("old", 1)
    now[0] = 5
    counters.set("young", 2)
    now[0] = 11
    assert counters.get("old") is None
    assert counters.get("young") == 2
    now[0] = 30
    counters.set("new", 3)  # sweeps every expired entry
    assert len(counters) == 1


def test_expiring_map_is_bounded_in_size():
    counters: ExpiringMap[int, int] = ExpiringMap(maxsize=3, ttl_seconds=1000)
    for n in range(10):
        counters.set(n, n)
    assert len(counters) == 3
    assert counters.get(9) == 9 and counters.get(0) is None
