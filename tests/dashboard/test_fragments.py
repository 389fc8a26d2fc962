"""What the session websocket pushes for a batch of events."""

from __future__ import annotations

import pytest

from memory_app.notepad import services as memory_services
from sessions_app import selectors as session_selectors
from sessions_app.dashboard.fragments import session_fragments
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db


def delta(seq: int, text: str) -> dict:
    return {
        "type": "assistant.delta",
        "session_id": "x",
        "seq": seq,
        "ts": "2026-01-01T00:00:00",
        "text": text,
    }


def test_streamed_text_renders_without_a_query(django_assert_num_queries):
    session = session_new()
    with django_assert_num_queries(0):
        html = session_fragments(
            session_id=session.pk, events=[delta(1, "Hel"), delta(2, "lo")], operator="op"
        )
    assert html.count('<span hx-swap-oob="beforeend:#streaming-text">') == 2


def test_streamed_text_is_escaped():
    session = session_new()
    html = session_fragments(session_id=session.pk, events=[delta(1, "<script>x</script>")], operator="op")
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_a_batch_renders_each_panel_once():
    session = session_new()
    for content in ("one", "two", "three"):
        memory_services.notepad_write(session_id=session.pk, content=content, author="agent")
    events = session_selectors.session_events_after(session_id=session.pk, after_seq=0)
    html = session_fragments(session_id=session.pk, events=events, operator="op")
    assert html.count('id="notepad-view"') == 1 and "three" in html
    assert html.count('class="tl-row') == 3
    assert '<span id="last-seq" data-seq="3" hidden hx-swap-oob="true">' in html
