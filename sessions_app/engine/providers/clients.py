"""A few SDK clients per event loop, shared by a provider's calls.

A client pools connections, so turns share them; an httpx pool cannot cross loops. More than
one: a pool's bookkeeping walks all of its requests and connections each time one starts or ends,
so hundreds of calls at once in one pool cost time quadratic in their number (a tenth of the CPU
of 500 concurrent turns with one pool, still 6% with eight)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

CLIENT_POOLS = 16

Client = TypeVar("Client")


class ClientPools(Generic[Client]):
    """One loop's clients for one configuration (`make` builds one): a call takes the client
    with the fewest calls in flight, the first on a tie. Taken in turn instead, one session's
    calls each went to another pool, where a connection idle for the pool's keep-alive (5 s) had
    been closed: a new TCP connection and TLS handshake for most calls of a quiet process. Now a
    process with one call at a time keeps using one connection, and a burst still spreads over
    every pool."""

    def __init__(self, make: Callable[[], Client]) -> None:
        self.make = make
        self.clients: list[Client | None] = [None] * CLIENT_POOLS
        self.in_flight = [0] * CLIENT_POOLS

    def take(self) -> tuple[int, Client]:
        index = self.in_flight.index(min(self.in_flight))
        client = self.clients[index]
        if client is None:
            client = self.clients[index] = self.make()
        self.in_flight[index] += 1
        return index, client

    def give_back(self, index: int) -> None:
        self.in_flight[index] -= 1


_pools: weakref.WeakKeyDictionary[Any, dict[Hashable, ClientPools[Any]]] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def pooled_client(key: Hashable, make: Callable[[], Client]) -> Iterator[Client]:
    """The running loop's client for `key` (a provider's name and settings), made by `make` when
    the pool has none yet, counted in flight until the block ends."""
    per_loop = _pools.setdefault(asyncio.get_running_loop(), {})
    pools = per_loop.get(key)
    if pools is None:
        pools = per_loop[key] = ClientPools(make)
    index, client = pools.take()
    try:
        yield client
    finally:
        pools.give_back(index)
