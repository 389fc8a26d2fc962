"""Anthropic's prompt cache, simulated by its documented rules (the fake Messages API's opt-in
``cache_rules="anthropic"`` mode; the cost benchmark's instrument).

The rules, as Anthropic's prompt-caching documentation states them:
- the cached prefix runs in the order tools, system, messages; a request is a sequence of blocks
  (each tool definition, each system block, each message's content blocks);
- at most 4 ``cache_control`` breakpoints per request (more: a 400 ``invalid_request_error``);
- each breakpoint writes a cache entry for the prefix that ends with its block;
- a read finds the longest cached prefix: at each breakpoint the cache is checked at the
  breakpoint's block boundary and at the boundaries of up to 20 blocks before it (the lookback),
  never further back;
- a prefix shorter than the model's minimum (1,024 tokens for Sonnet and Opus, 2,048 for Haiku)
  is neither written nor read;
- an entry lives 5 minutes (``ttl: "1h"``: one hour), refreshed each time it is read; when TTLs
  are mixed, a 1-hour breakpoint may not follow a 5-minute one (400);
- automatic caching: a top-level ``cache_control`` puts a breakpoint on the request's last block
  (it moves forward as the conversation grows) and takes one of the 4 slots;
- usage: ``cache_read_input_tokens`` is the prefix read, ``cache_creation_input_tokens`` what lies
  between it and the last breakpoint (split by the TTL of the breakpoint that ends each piece in
  ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``),
  ``input_tokens`` the rest, after the last breakpoint.
Entries are per model, and a block's identity includes the role of the message holding it (the
same text as a user's and as an assistant's is not the same prefix). A change of ``tool_choice``
(absent counts as ``auto``) invalidates the cached messages, not the tools nor the system prompt.
What this does not model: the API's own per-request token overhead, ``thinking`` changes
invalidating parts of the cache, and cache isolation between organisations (one fake, one cache).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MIN_TOKENS_DEFAULT = 1024  # Sonnet and Opus
MIN_TOKENS_HAIKU = 2048


class CacheRuleError(ValueError):
    """A request the real API refuses for its cache_control (a 400 invalid_request_error)."""


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix the model caches: 2,048 tokens for Haiku models, 1,024 otherwise."""
    return MIN_TOKENS_HAIKU if "haiku" in model.lower() else MIN_TOKENS_DEFAULT


def _strip(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


@dataclass(frozen=True)
class PromptBlock:
    """One block of a request's prefix: where it is (``tools``, ``system`` or ``messages``, with
    the message's index and role), the block as sent, and its canonical identity (without its
    ``cache_control``)."""

    part: str
    message: int | None
    role: str | None
    block: Any

    @property
    def key(self) -> bytes:
        ident = [self.part, self.role, _strip(self.block)]
        return json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    @property
    def cache_control(self) -> dict[str, Any] | None:
        control = self.block.get("cache_control") if isinstance(self.block, dict) else None
        return control if isinstance(control, dict) else None


def request_blocks(body: dict[str, Any]) -> list[PromptBlock]:
    """The request's blocks in prefix order: tools, system, then each message's content blocks."""
    out = [PromptBlock("tools", None, None, t) for t in body.get("tools") or []]
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        out.append(PromptBlock("system", None, None, block))
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            out.append(PromptBlock("messages", index, message.get("role"), block))
    return out


def prefix_hashes(body: dict[str, Any]) -> list[str]:
    """hashes[i]: the identity of the prefix ending with block i (the model included). The
    request's ``tool_choice`` (absent: ``auto``) is part of every message block's identity:
    changing it invalidates the cached messages, not the tools nor the system prompt."""
    digest = hashlib.sha256(str(body.get("model", "")).encode() + b"\x00")
    choice = body.get("tool_choice") or {"type": "auto"}
    out = []
    messages_begun = False
    for block in request_blocks(body):
        if block.part == "messages" and not messages_begun:
            messages_begun = True
            digest.update(b"tool_choice:" + json.dumps(choice, sort_keys=True).encode() + b"\x00")
        digest.update(block.key + b"\x00")
        out.append(digest.copy().hexdigest())
    return out


def breakpoints_check(body: dict[str, Any]) -> list[tuple[int, str]]:
    """The request's breakpoints as (block index, ttl), or CacheRuleError as the API would refuse."""
    points: list[tuple[int, str]] = []
    blocks = request_blocks(body)
    automatic = body.get("cache_control")
    for index, block in enumerate(blocks):
        control = block.cache_control
        if control is None and index == len(blocks) - 1 and isinstance(automatic, dict):
            control = automatic  # automatic caching: the last block, unless marked already
        if control is None:
            continue
        if control.get("type") != "ephemeral":
            raise CacheRuleError(f"cache_control.type must be 'ephemeral', not {control.get('type')!r}")
        ttl = control.get("ttl", "5m")
        if ttl not in TTL_SECONDS:
            raise CacheRuleError(f"cache_control.ttl must be '5m' or '1h', not {ttl!r}")
        points.append((index, ttl))
    if len(points) > MAX_BREAKPOINTS:
        raise CacheRuleError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(points)}."
        )
    ttls = [ttl for _, ttl in points]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise CacheRuleError("a ttl='1h' cache_control block must not come after a ttl='5m' one")
    return points


@dataclass
class CacheOutcome:
    """What one request did to the cache: the usage figures and where they end (block indexes)."""

    read_tokens: int
    written_5m: int
    written_1h: int
    uncached_tokens: int
    read_blocks: int  # the read prefix is blocks[:read_blocks]
    written_blocks: int  # ... the written one blocks[read_blocks:written_blocks]

    @property
    def written_tokens(self) -> int:
        return self.written_5m + self.written_1h

    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.uncached_tokens,
            "cache_creation_input_tokens": self.written_tokens,
            "cache_read_input_tokens": self.read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.written_5m,
                "ephemeral_1h_input_tokens": self.written_1h,
            },
        }


class CacheSimulator:
    """The prompt cache of one API (thread-safe). ``clock`` gives seconds (injectable, so tests and
    benchmarks move time without sleeping); ``token_counter`` counts one block's tokens;
    ``min_tokens`` overrides the per-model minimum."""

    def __init__(
        self,
        token_counter: Callable[[Any], int],
        *,
        clock: Callable[[], float] = time.monotonic,
        min_tokens: int | None = None,
    ) -> None:
        self.count = token_counter
        self.clock = clock
        self.min_tokens = min_tokens
        self._entries: dict[str, float] = {}  # prefix hash -> expiry (clock seconds)
        self._ttls: dict[str, float] = {}  # prefix hash -> its TTL, for refreshes
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._ttls.clear()

    def __len__(self) -> int:
        now = self.clock()
        with self._lock:
            return sum(1 for expiry in self._entries.values() if expiry > now)

    def check(self, body: dict[str, Any]) -> None:
        """Raises CacheRuleError for a request the API would refuse (before any answer)."""
        breakpoints_check(body)

    def apply(self, body: dict[str, Any]) -> CacheOutcome:
        """Read and write the cache for one request and say what it cost."""
        points = breakpoints_check(body)
        blocks = request_blocks(body)
        tokens = [self.count(b.block) for b in blocks]
        hashes = prefix_hashes(body)
        cumulative = [0]
        for t in tokens:
            cumulative.append(cumulative[-1] + t)
        minimum = self.min_tokens or min_cacheable_tokens(str(body.get("model", "")))
        now = self.clock()
        with self._lock:
            read_end = 0  # blocks read: blocks[:read_end]
            for index, _ in points:
                for end in range(index, max(index - LOOKBACK_BLOCKS, 0) - 1, -1):
                    expiry = self._entries.get(hashes[end])
                    if expiry is not None and expiry > now and cumulative[end + 1] >= minimum:
                        read_end = max(read_end, end + 1)
                        break
            if read_end:
                hit = hashes[read_end - 1]
                self._entries[hit] = now + self._ttls[hit]  # a read refreshes the entry
            written = {"5m": 0, "1h": 0}
            written_end = covered = read_end
            for index, ttl in points:
                if cumulative[index + 1] < minimum:
                    continue  # too short to cache: neither written nor read
                seconds = TTL_SECONDS[ttl]
                key = hashes[index]
                self._entries[key] = max(self._entries.get(key, 0.0), now + seconds)
                self._ttls[key] = max(self._ttls.get(key, 0.0), seconds)
                if index + 1 > covered:
                    written[ttl] += cumulative[index + 1] - cumulative[covered]
                    covered = written_end = index + 1
        total = cumulative[-1]
        read = cumulative[read_end]
        return CacheOutcome(
            read_tokens=read,
            written_5m=written["5m"],
            written_1h=written["1h"],
            uncached_tokens=total - read - written["5m"] - written["1h"],
            read_blocks=read_end,
            written_blocks=written_end,
        )
