"""`bench_cost.py`'s analysis (bench/_cost_report.py): the oracle and the causes of prefix breaks,
on hand-made request bodies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))  # after every other module

from _cost_report import Request, break_cause, causes, oracle  # noqa: E402

from tests.fake_anthropic import count_tokens  # noqa: E402

MODEL = "claude-sonnet-4-6"
TOOL = {"name": "fs_read", "description": "read", "input_schema": {"type": "object"}}


def words(n: int, tag: str) -> dict[str, Any]:
    return {"type": "text", "text": f"{tag}:" + " word" * n}


def body(
    *blocks: dict[str, Any], system: str = "You work.", tools: list[dict] | None = None
) -> dict[str, Any]:
    messages = [{"role": ("user", "assistant")[i % 2], "content": [b]} for i, b in enumerate(blocks)]
    return {
        "model": MODEL,
        "tools": tools or [TOOL],
        "system": [{"type": "text", "text": system}],
        "messages": messages,
    }


def request(index: int, at: float, b: dict[str, Any], stream: str = "parent") -> Request:
    usage = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return Request(index, stream, "turn", at, b, usage, 1.0)


def test_the_oracle_reads_what_an_earlier_request_wrote_and_writes_what_a_later_one_reads() -> None:
    a, b, c = words(1500, "a"), words(300, "b"), words(300, "c")
    requests = [request(0, 0, body(a)), request(1, 4, body(a, b)), request(2, 8, body(a, b, c))]
    first, second, third = oracle(requests)
    head = requests[0].tokens
    assert (first.read, first.written, first.uncached) == (0, head, 0)
    assert (second.read, second.written, second.uncached) == (head, count_tokens(b), 0)
    # Nothing comes after the last request: what is new in it is not worth writing.
    assert (third.read, third.written, third.uncached) == (requests[1].tokens, 0, count_tokens(c))
    assert third.billed == pytest.approx(0.1 * requests[1].tokens + count_tokens(c))


def test_the_oracle_keeps_the_ttl_and_the_minimum() -> None:
    a, b = words(1500, "a"), words(300, "b")
    late = oracle([request(0, 0, body(a)), request(1, 301, body(a, b))])
    assert [(o.read, o.written) for o in late] == [(0, 0), (0, 0)]
    small, more = words(100, "s"), words(100, "t")
    short = oracle([request(0, 0, body(small)), request(1, 4, body(small, more))])
    assert [(o.read, o.written) for o in short] == [(0, 0), (0, 0)]  # under 1,024 tokens


def test_break_causes() -> None:
    a, b = words(50, "a"), words(50, "b")
    base = request(0, 0, body(a, b))
    other_tools = [TOOL, {"name": "scratchpad_read", "description": "r", "input_schema": {"type": "object"}}]
    assert (
        break_cause(base, request(1, 4, body(a, b, words(5, "c"))))[0]
        == "none (extends the previous request)"
    )
    assert break_cause(base, request(1, 4, body(a, b, tools=other_tools)))[:2] == (
        "tool list",
        "tools[1] (scratchpad_read)",
    )
    notepad = body(a, b, system="You work.\n\n## Session Notepad\n- a note")
    assert break_cause(request(0, 0, notepad), request(1, 4, body(a, b)))[0] == "notepad in the system prompt"
    assert break_cause(base, request(1, 4, body(words(9, "summary"), b)))[0] == "compaction (new epoch)"
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x " * 40}
    masked = dict(result, content="[Tool result masked to save context: 80 characters]")
    cause, where, lost = break_cause(request(0, 0, body(a, b, result)), request(1, 4, body(a, b, masked)))
    assert (cause, where) == ("masking", "message 2 (user)")
    assert lost == count_tokens(result)


def test_causes_compare_each_stream_with_itself() -> None:
    a, b = words(50, "a"), words(50, "b")
    requests = [request(0, 0, body(a)), request(1, 4, body(b), "child"), request(2, 8, body(a, b))]
    per, totals = causes(requests)
    assert per[2][0] == "none (extends the previous request)"
    assert per[1][0] == "first request of its stream"
    assert totals["none (extends the previous request)"].requests == 1
