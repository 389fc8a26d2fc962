"""The engine's per-process caches stay within their bounds (bench/README.md, "Memory per
connection and per session"): prepared histories (`history.py`) and previous requests
(`prefix.py`) within their byte budgets, the stable texts' token counts (`context.py`) without
the texts."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from collections.abc import Iterator

import pytest

from sessions_app.engine import context, history, prefix
from sessions_app.engine.prepared import PreparedHistory, StoredMessage


@pytest.fixture(autouse=True)
def empty_caches() -> Iterator[None]:
    history._histories.clear()
    prefix._last_request.clear()
    context._stable_tokens.clear()
    yield
    history._histories.clear()
    prefix._last_request.clear()
    context._stable_tokens.clear()


def _history(messages: int, *, text: str = "lorem ipsum dolor sit amet " * 8) -> PreparedHistory:
    roles = ("user", "assistant")
    content = [[{"type": "text", "text": f"{n} {text}"}] for n in range(messages)]
    return PreparedHistory([StoredMessage(n, roles[n % 2], content[n], 60) for n in range(messages)])


def test_a_history_weighs_what_it_holds_within_a_factor_of_two():
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        prepared = _history(2000)
        for index in range(len(prepared.messages)):
            prepared.encoded_message(index)  # a built request encodes every message
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / 2 < prepared.nbytes < held * 2


def test_a_history_grows_its_weight_as_messages_are_appended():
    prepared = _history(10)
    before = prepared.nbytes
    prepared.append(StoredMessage(10, "user", [{"type": "text", "text": "x" * 10_000}], 2500))
    assert prepared.nbytes - before > 20_000  # the text, decoded and encoded


def test_the_history_cache_holds_at_most_its_byte_budget(settings):
    one = _history(100)
    settings.PALIMPSEST_HISTORY_CACHE_BYTES = one.nbytes * 3
    sessions = [uuid.uuid4() for _ in range(10)]
    for session_id in sessions:
        history.history_remember(session_id, _history(100))
        assert history._histories.nbytes() <= settings.PALIMPSEST_HISTORY_CACHE_BYTES
    assert [s in history._histories for s in sessions] == [False] * 7 + [True] * 3


def test_the_history_cache_drops_the_least_recently_used_history(settings):
    settings.PALIMPSEST_HISTORY_CACHE_BYTES = _history(100).nbytes * 2
    first, second, third = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    history.history_remember(first, _history(100))
    history.history_remember(second, _history(100))
    history.history_remember(first, history._histories.get(first) or _history(100))  # a new turn
    history.history_remember(third, _history(100))
    assert (first in history._histories, second in history._histories, third in history._histories) == (
        True,
        False,
        True,
    )


def test_a_history_bigger_than_the_budget_is_not_kept(settings):
    settings.PALIMPSEST_HISTORY_CACHE_BYTES = _history(100).nbytes * 2
    small, big = uuid.uuid4(), uuid.uuid4()
    history.history_remember(small, _history(100))
    history.history_remember(big, _history(300))
    assert big not in history._histories
    assert small in history._histories


def test_the_prefix_cache_holds_at_most_its_byte_budget(settings):
    settings.PALIMPSEST_PREFIX_CACHE_BYTES = 3000
    sessions = [uuid.uuid4() for _ in range(10)]
    for session_id in sessions:
        prefix.stable_prefix_bytes(session_id, b"{" + b"x" * 999)
        assert prefix._last_request.nbytes() <= 3000
    assert [s in prefix._last_request for s in sessions] == [False] * 7 + [True] * 3
    # The sessions still kept measure their stable prefix exactly; an evicted one starts from 0.
    assert prefix.stable_prefix_bytes(sessions[-1], b"{" + b"x" * 500 + b"y") == 501
    assert prefix.stable_prefix_bytes(sessions[0], b"{" + b"x" * 999) == 0


def test_a_request_bigger_than_the_prefix_budget_is_not_kept(settings):
    settings.PALIMPSEST_PREFIX_CACHE_BYTES = 1000
    session_id, other = uuid.uuid4(), uuid.uuid4()
    prefix.stable_prefix_bytes(other, b"o" * 300)
    prefix.stable_prefix_bytes(session_id, b"x" * 600)
    assert prefix.stable_prefix_bytes(session_id, b"x" * 2000) == 600
    assert session_id not in prefix._last_request  # its older request went too
    assert other in prefix._last_request  # nothing else was evicted for it
    assert prefix.stable_prefix_bytes(session_id, b"x" * 2000) == 0


def test_the_stable_text_token_cache_does_not_hold_the_texts():
    texts = [f"system prompt {n}: " + "lorem ipsum dolor sit amet " * 2000 for n in range(10)]  # 540 KB
    counts = [context._stable_text_tokens(t) for t in texts[:1]]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        counts += [context._stable_text_tokens(t) for t in texts[1:]]
        del texts
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(context._stable_tokens) == 10
    assert held < 50_000  # the nine texts weigh 486 KB


def test_a_stable_text_is_counted_once():
    text = "You are a careful agent. " * 40
    first = context._stable_text_tokens(text)
    assert context._stable_text_tokens(text) == first
    assert len(context._stable_tokens) == 1


def test_hundreds_of_sessions_keep_their_history_and_last_request_within_the_budgets():
    """A process running 600 sessions at once keeps each one's prepared history and previous
    request for its next turn (the byte budgets, not the number of sessions, bound them)."""
    sessions = [uuid.uuid4() for _ in range(600)]
    for session_id in sessions:
        history.history_remember(session_id, _history(4))
        prefix.stable_prefix_bytes(session_id, b"{" + b"x" * 2000)
    assert all(history._histories.get(s) is not None for s in sessions)
    assert all(s in prefix._last_request for s in sessions)
