"""The stable prefix: how much of each request is byte-identical to the start of the session's
previous request (what prompt caching can reuse), measured per call and shown by the dashboard."""

from __future__ import annotations

import uuid
from collections import OrderedDict

# Sessions whose previous request this process keeps (an LRU: memory stays bounded).
PREFIX_CACHE_SESSIONS = 256
_last_request: OrderedDict[uuid.UUID, bytes] = OrderedDict()


PREFIX_COMPARE_BLOCK = 65536


def common_prefix_length(a: bytes, b: bytes) -> int:
    """Length of the common start of two requests: compare 64 KiB blocks (memcmp on small
    copies), then binary-search inside the first block that differs. Linear in the prefix, and
    about a millisecond for a 5 MB request."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit:
        end = min(start + PREFIX_COMPARE_BLOCK, limit)
        if a[start:end] != b[start:end]:
            low, high = start, end - 1
            while low < high:
                mid = (low + high + 1) // 2
                if a[start:mid] == b[start:mid]:
                    low = mid
                else:
                    high = mid - 1
            return low
        start = end
    return limit


def stable_prefix_bytes(session_id: uuid.UUID, encoded: bytes) -> int:
    """Remember `encoded` as the session's latest request; return its common start with the
    previous one."""
    previous = _last_request.get(session_id, b"")
    _last_request[session_id] = encoded
    _last_request.move_to_end(session_id)
    while len(_last_request) > PREFIX_CACHE_SESSIONS:
        _last_request.popitem(last=False)
    return common_prefix_length(previous, encoded)
