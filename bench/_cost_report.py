"""What `bench_cost.py` makes of the recorded requests: the bill, the best any breakpoint
placement could do (an offline oracle), and where each request's prefix parted from the
previous one's.

Billed input-token equivalents: 1.0 x uncached + 1.25 x written (5-minute entries; 2.0 x for
1-hour ones) + 0.1 x read, Anthropic's multipliers of the base input price.

**The oracle** replays the same request bodies, in the same order and at the same (virtual)
times, with the cache placement chosen in hindsight:
- a request reads the longest prefix, ending at a block boundary, that an earlier request wrote
  and that is still alive (5 minutes since it was written or last read; a read refreshes it);
- it writes up to the longest prefix that any later request sent within 5 minutes of it shares
  with it (nothing when that is not longer than what it read); the write costs 1.25 x from the end
  of its read to the end of the write, as the API bills it;
- it ignores the 4-breakpoint limit and the 20-block lookback: every block boundary of a written
  prefix is an entry (so a later request can read any part of it). It keeps the minimum cacheable
  length (a prefix under it is neither written nor read) and the tokens the fake counts.
So no placement of cache_control breakpoints over these requests pays less than it (up to its
greedy write rule: writing only what a later request reads, the moment it is known to be read).
It only moves the cache: the requests themselves (what the engine sends) are the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.fake_anthropic import count_tokens
from tests.prompt_cache import TTL_SECONDS, PromptBlock, min_cacheable_tokens, prefix_hashes, request_blocks

READ, WRITE_5M, WRITE_1H = 0.1, 1.25, 2.0
TTL = TTL_SECONDS["5m"]
MASKED_HEAD = "[Tool result masked"
SUMMARY_HEADS = ("[Summary of the conversation so far", "[Summary of your earlier steps")
SCRATCHPAD_HEAD = "[Session Scratchpad"
NOTEPAD_HEADING = "## Session Notepad"


@dataclass
class Request:
    """One answered request: its body, who sent it (`stream`: a session, or "summary"), when
    (virtual seconds), the simulator's usage, and its blocks' tokens and prefix hashes."""

    index: int
    stream: str
    purpose: str  # turn, summary, child
    at: float
    body: dict[str, Any]
    usage: dict[str, Any]
    ratio: float
    blocks: list[PromptBlock] = field(init=False)
    cumulative: list[int] = field(init=False)  # cumulative[b]: tokens of blocks[:b]
    hashes: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = request_blocks(self.body)
        self.cumulative = [0]
        for block in self.blocks:
            self.cumulative.append(self.cumulative[-1] + count_tokens(block.block, self.ratio))
        self.hashes = prefix_hashes(self.body)

    @property
    def tokens(self) -> int:
        return self.cumulative[-1]

    @property
    def read(self) -> int:
        return int(self.usage.get("cache_read_input_tokens") or 0)

    @property
    def written(self) -> int:
        return int(self.usage.get("cache_creation_input_tokens") or 0)

    @property
    def uncached(self) -> int:
        return int(self.usage.get("input_tokens") or 0)

    @property
    def billed(self) -> float:
        split = self.usage.get("cache_creation") or {}
        one_hour = int(split.get("ephemeral_1h_input_tokens") or 0)
        return self.uncached + WRITE_5M * (self.written - one_hour) + WRITE_1H * one_hour + READ * self.read


def common_blocks(a: Request, b: Request) -> int:
    """How many leading blocks two requests share (their prefix hashes agree up to there)."""
    low, high = 0, min(len(a.hashes), len(b.hashes))
    while low < high:  # the first index where they differ
        mid = (low + high) // 2
        if a.hashes[mid] == b.hashes[mid]:
            low = mid + 1
        else:
            high = mid
    return low


@dataclass
class OracleCost:
    read: int
    written: int
    uncached: int

    @property
    def billed(self) -> float:
        return self.uncached + WRITE_5M * self.written + READ * self.read


def oracle(requests: list[Request]) -> list[OracleCost]:
    entries: dict[str, float] = {}  # prefix hash -> expiry
    out = []
    for i, request in enumerate(requests):
        minimum = min_cacheable_tokens(str(request.body.get("model", "")))
        read_blocks = 0
        for end in range(len(request.hashes), 0, -1):
            if entries.get(request.hashes[end - 1], -1.0) > request.at and request.cumulative[end] >= minimum:
                read_blocks = end
                break
        for end in range(read_blocks):
            if request.hashes[end] in entries:
                entries[request.hashes[end]] = request.at + TTL
        later = [
            common_blocks(request, other)
            for other in requests[i + 1 :]
            if other.at - request.at <= TTL and other.body.get("model") == request.body.get("model")
        ]
        write_blocks = max(later, default=0)
        written = 0
        if write_blocks > read_blocks and request.cumulative[write_blocks] >= minimum:
            written = request.cumulative[write_blocks] - request.cumulative[read_blocks]
            for end in range(write_blocks):
                entries[request.hashes[end]] = max(entries.get(request.hashes[end], 0.0), request.at + TTL)
        read = request.cumulative[read_blocks]
        out.append(OracleCost(read, written, request.tokens - read - written))
    return out


# ---------------------------------------------------------------------------
# Where a request parts from the previous request of its stream
# ---------------------------------------------------------------------------
def _text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(_text(b) for b in content)
        return str(content or "")
    return str(block.get("text") or "")


def break_cause(previous: Request, request: Request) -> tuple[str, str, int]:
    """(cause, where, tokens): why the request's prefix parts from the previous request's, where
    (tools / system block / message and block), and the previous request's tokens from there on
    (the prefix it could have read and cannot)."""
    shared = common_blocks(previous, request)
    lost = previous.tokens - previous.cumulative[shared]
    if shared == len(previous.blocks):
        return "none (extends the previous request)", "-", 0
    new = request.blocks[shared] if shared < len(request.blocks) else None
    old = previous.blocks[shared]
    at = new or old
    if at.part == "tools":
        name = at.block.get("name") if isinstance(at.block, dict) else "?"
        return "tool list", f"tools[{shared}] ({name})", lost
    if at.part == "system":
        first = next(i for i, b in enumerate(request.blocks) if b.part == "system") if new else shared
        where = f"system[{shared - first}]"
        if NOTEPAD_HEADING in _text(old.block) or (new and NOTEPAD_HEADING in _text(new.block)):
            return "notepad in the system prompt", where, lost
        return "system prompt", where, lost
    old_text, new_text = _text(old.block), _text(new.block) if new else ""
    where = f"message {at.message} ({at.role})"
    if new_text.startswith(MASKED_HEAD) and not old_text.startswith(MASKED_HEAD):
        return "masking", where, lost
    if at.message == 0 or new_text.startswith(SUMMARY_HEADS):
        return "compaction (new epoch)", where, lost
    if old_text.startswith(SCRATCHPAD_HEAD) or NOTEPAD_HEADING in old_text:
        return "the previous latest message's memory blocks", where, lost
    if new_text.startswith("Task «"):
        return "task collapsed (end_task)", where, lost
    if new is None:
        return "history cut", where, lost
    return "message changed", where, lost


@dataclass
class Cause:
    requests: int = 0
    lost: int = 0  # the previous requests' tokens after the break
    written: int = 0  # what those requests wrote to the cache (the simulator's figure)


def causes(requests: list[Request]) -> tuple[dict[int, tuple[str, str, int]], dict[str, Cause]]:
    """Per request index its break (against the previous request of its stream), and totals by cause."""
    last: dict[str, Request] = {}
    per: dict[int, tuple[str, str, int]] = {}
    totals: dict[str, Cause] = {}
    for request in requests:
        if request.purpose == "summary":
            # Not a step of its stream (the next step is compared with the step before it): the
            # separate call has its own prompt; the shared one is the session's prefix and a question.
            shared = bool(request.body.get("tools"))
            per[request.index] = ("summary call (the session's prefix)" if shared else "summary call", "-", 0)
            continue
        previous = last.get(request.stream)
        last[request.stream] = request
        if previous is None:
            per[request.index] = ("first request of its stream", "-", 0)
            continue
        cause = break_cause(previous, request)
        per[request.index] = cause
        total = totals.setdefault(cause[0], Cause())
        total.requests += 1
        total.lost += cause[2]
        total.written += request.written
    return per, totals
