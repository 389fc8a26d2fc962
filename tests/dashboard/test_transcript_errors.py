"""A turn's error is part of the transcript: shown on a reload and in older pages as it was live."""

from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.dashboard.selectors import TRANSCRIPT_PAGE_SIZE
from sessions_app.models import AgentSession
from tests.dashboard.conftest import message_store, session_new

pytestmark = pytest.mark.django_db

TOO_SMALL = "The message does not fit the context window."


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def turn_failed(session: AgentSession, question: str) -> None:
    """What a turn that failed leaves: its user's message, an `error` and `turn.completed: error`."""
    message_store(session, "user", [text(question)])
    services.event_emit(
        session_id=session.pk,
        type="error",
        payload={"code": "context_window_too_small", "message": TOO_SMALL},
    )
    services.event_emit(
        session_id=session.pk, type="turn.completed", payload={"turn_id": "t", "stop_reason": "error"}
    )


def transcript_of(html: str) -> str:
    return html.split('id="transcript-items"', 1)[1].split('id="streaming"', 1)[0]


def test_a_turns_error_and_its_end_are_shown_after_its_message_on_a_reload(operator_client):
    session = session_new()
    turn_failed(session, "a long question")
    message_store(session, "user", [text("the next question")])
    message_store(session, "assistant", [text("the answer")])
    html = transcript_of(operator_client.get(f"/sessions/{session.pk}/").content.decode())
    assert 'class="marker error"' in html
    assert f"context_window_too_small: {TOO_SMALL}" in html
    assert "Turn ended: error" in html
    assert (
        html.index("a long question")
        < html.index("context_window_too_small")
        < html.index("Turn ended: error")
        < html.index("the next question")
    )


def test_a_turn_that_ended_normally_adds_no_marker(operator_client):
    session = session_new()
    message_store(session, "user", [text("hello")])
    services.event_emit(
        session_id=session.pk, type="turn.completed", payload={"turn_id": "t", "stop_reason": "end_turn"}
    )
    html = transcript_of(operator_client.get(f"/sessions/{session.pk}/").content.decode())
    assert "Turn ended" not in html


def test_an_error_in_an_older_page_is_shown_there_once(operator_client):
    session = session_new()
    turn_failed(session, "the failed question")
    for n in range(TRANSCRIPT_PAGE_SIZE + 5):
        message_store(session, "user" if n % 2 else "assistant", [text(f"message {n}")])
    latest = transcript_of(operator_client.get(f"/sessions/{session.pk}/").content.decode())
    assert "context_window_too_small" not in latest
    older_before = int(latest.split("?before=", 1)[1].split('"', 1)[0])
    older = operator_client.get(f"/sessions/{session.pk}/transcript/?before={older_before}").content.decode()
    assert older.count("context_window_too_small") == 1
    assert (
        older.index("the failed question")
        < older.index("context_window_too_small")
        < older.index("message 0")
    )


def test_an_error_newer_than_the_pages_last_seq_is_left_to_the_websocket(operator_client):
    """The websocket replays what came after the page's `last_seq`: the page does not show it too."""
    from sessions_app.dashboard.selectors import transcript_page

    session = session_new()
    turn_failed(session, "question")
    page = transcript_page(session_id=session.pk, until_seq=0)
    assert [item.kind for item in page.items] == ["user"]
