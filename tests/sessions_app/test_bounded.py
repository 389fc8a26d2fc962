"""Per-process maps with bounded memory."""

from __future__ import annotations

from sessions_app.common.caches import ExpiringMap, LRUCache, SizedLRUCache


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


def test_sized_lru_cache_holds_at_most_its_byte_budget():
    cache: SizedLRUCache[str, bytes] = SizedLRUCache(maxsize=100, max_bytes=250, size_of=len)
    for key in "abcdef":
        cache.set(key, b"x" * 100)
        assert cache.nbytes() <= 250
    assert [k for k in "abcdef" if k in cache] == ["e", "f"]


def test_sized_lru_cache_drops_the_least_recently_used_first():
    cache: SizedLRUCache[str, bytes] = SizedLRUCache(maxsize=100, max_bytes=300, size_of=len)
    for key in "abc":
        cache.set(key, b"x" * 100)
    assert cache.get("a") == b"x" * 100  # "b" is now the least recently used
    cache.set("d", b"x" * 100)
    assert [k for k in "abcd" if k in cache] == ["a", "c", "d"]


def test_sized_lru_cache_does_not_keep_a_value_bigger_than_the_budget():
    cache: SizedLRUCache[str, bytes] = SizedLRUCache(maxsize=100, max_bytes=250, size_of=len)
    cache.set("small", b"x" * 10)
    cache.set("big", b"x" * 10)
    assert cache.set("big", b"x" * 251) is False
    assert "big" not in cache  # its older, smaller value went too: it was out of date
    assert "small" in cache  # nothing else was evicted for it


def test_sized_lru_cache_weighs_a_value_set_again_after_it_grew():
    # A cached value may grow after it was set (a history a running turn appends to); its owner
    # sets it again, which weighs it as it is now.
    grown = bytearray(b"x" * 100)
    cache: SizedLRUCache[str, bytearray] = SizedLRUCache(maxsize=100, max_bytes=300, size_of=len)
    cache.set("grows", grown)
    cache.set("other", bytearray(b"x" * 100))
    grown.extend(b"x" * 150)
    assert cache.nbytes() == 200  # weighed when set
    cache.set("grows", grown)
    assert cache.nbytes() == 350 - 100 and "other" not in cache  # over the budget: the oldest went
    cache.set("new", bytearray(b"x" * 60))
    assert "grows" not in cache and cache.nbytes() == 60


def test_sized_lru_cache_weighs_every_entry_again_within_maxsize_sets():
    """A value that grew and was not set again is counted as it is now within `maxsize` sets
    (all weighed again, amortized one weighing a set), and dropped if the budget says so."""
    grown = bytearray(b"x" * 100)
    weighed: list[object] = []

    def size_of(value: bytearray) -> int:
        weighed.append(value)
        return len(value)

    cache: SizedLRUCache[int, bytearray] = SizedLRUCache(maxsize=10, max_bytes=1000, size_of=size_of)
    cache.set(-1, grown)
    grown.extend(b"x" * 900)
    for n in range(9):
        cache.set(n, bytearray(b"x" * 10))
    assert -1 not in cache and cache.nbytes() == 90 <= 1000
    assert len(weighed) == 10 + 10  # each set weighed its value, then the one round of all ten


def test_sized_lru_cache_is_also_bounded_in_entries():
    cache: SizedLRUCache[int, bytes] = SizedLRUCache(maxsize=3, max_bytes=10**9, size_of=len)
    for n in range(10):
        cache.set(n, b"")
    assert len(cache) == 3 and 9 in cache


def test_sized_lru_cache_reads_a_callable_budget_at_each_set():
    budget = [1000]
    cache: SizedLRUCache[str, bytes] = SizedLRUCache(maxsize=100, max_bytes=lambda: budget[0], size_of=len)
    cache.set("a", b"x" * 400)
    cache.set("b", b"x" * 400)
    budget[0] = 500
    cache.set("c", b"x" * 10)
    assert [k for k in "abc" if k in cache] == ["b", "c"]


def test_sized_lru_cache_with_fixed_sizes_keeps_what_the_weighing_one_keeps():
    """With `fixed_sizes`, a running total instead of weighing every entry at each `set`: over
    random sets, gets, pops and clears, the same entries kept, the same order, the same bytes,
    and each value weighed once."""
    import random

    rng = random.Random(7)
    weighed: list[bytes] = []

    def size_of(value: bytes) -> int:
        weighed.append(value)
        return len(value)

    fixed: SizedLRUCache[int, bytes] = SizedLRUCache(
        maxsize=8, max_bytes=1000, size_of=size_of, fixed_sizes=True
    )
    weighing: SizedLRUCache[int, bytes] = SizedLRUCache(maxsize=8, max_bytes=1000, size_of=len)
    for _ in range(2000):
        key, roll = rng.randrange(12), rng.random()
        if roll < 0.6:
            value = b"x" * rng.choice([0, 1, 50, 200, 400, 999, 1000, 1001])
            sets = len(weighed)
            assert fixed.set(key, value) == weighing.set(key, value)
            assert len(weighed) == sets + 1
        elif roll < 0.85:
            assert fixed.get(key) == weighing.get(key)
        elif roll < 0.99:
            assert fixed.pop(key) == weighing.pop(key)
        else:
            fixed.clear()
            weighing.clear()
        assert list(fixed._data.items()) == list(weighing._data.items())
        assert fixed.nbytes() == weighing.nbytes() <= 1000
