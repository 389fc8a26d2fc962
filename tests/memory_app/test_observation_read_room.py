"""`scratchpad_read` never returns more than the next request has room for (issue 30, item 3):
its read is cut to `ToolContext.room_tokens` and says how to read on."""

from __future__ import annotations

from memory_app.observations.tools import read_fit
from sessions_app.common.estimate import estimate_json_tokens

TEXT = "".join(f"line {i:04d} of the log, with some words\n" for i in range(400))


def head(n: int) -> dict:
    return {
        "scratchpad_id": "0" * 16,
        "mode": "head",
        "kind": "text",
        "start": 0,
        "end": n,
        "total_chars": len(TEXT),
        "content": TEXT[:n],
    }


def test_a_read_that_fits_its_room_is_returned_as_it_is():
    result = head(200)
    assert read_fit(result, 10_000) is result and read_fit(result, None) is result


def test_a_head_read_over_its_room_keeps_its_start_and_says_where_to_read_on():
    fitted = read_fit(head(len(TEXT)), 500)
    assert estimate_json_tokens(fitted) <= 500
    assert TEXT.startswith(fitted["content"]) and fitted["end"] == len(fitted["content"])
    assert f"mode range, start {fitted['end']}" in fitted["truncated"]


def test_a_tail_read_over_its_room_keeps_its_end():
    result = {**head(len(TEXT)), "mode": "tail"}
    fitted = read_fit(result, 400)
    assert TEXT.endswith(fitted["content"]) and fitted["start"] == len(TEXT) - len(fitted["content"])
    assert f"end {fitted['start']}" in fitted["truncated"]


def test_a_lines_read_over_its_room_ends_on_a_whole_line_and_reads_on_from_the_next():
    result = {
        "scratchpad_id": "0" * 16,
        "mode": "lines",
        "kind": "text",
        "start_line": 1,
        "end_line": 400,
        "total_lines": 400,
        "content": TEXT,
    }
    fitted = read_fit(result, 300)
    assert fitted["content"].endswith("\n") and estimate_json_tokens(fitted) <= 300
    shown = fitted["content"].count("\n")
    assert fitted["end_line"] == shown and f"start_line {shown + 1}" in fitted["truncated"]
