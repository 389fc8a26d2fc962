"""The timeline: every event, newest first, with each run of streamed deltas folded into one row."""

from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.dashboard import selectors
from sessions_app.dashboard.selectors.history import timeline_rows
from tests.dashboard.conftest import session_new


def frame(seq: int, kind: str, **fields) -> dict:
    return {"seq": seq, "type": kind, **fields}


def test_a_run_of_deltas_is_one_row_with_their_text_in_order():
    frames = [
        frame(5, "turn.completed"),
        frame(4, "assistant.delta", text="world"),
        frame(3, "assistant.delta", text=", "),
        frame(2, "assistant.delta", text="Hello"),
        frame(1, "user.message", content="hi"),
    ]
    rows = timeline_rows(frames)
    assert [r.frame["seq"] if r.frame else [d["seq"] for d in r.deltas] for r in rows] == [5, [4, 3, 2], 1]
    assert rows[1].deltas_text == "Hello, world"


def test_a_single_delta_stays_a_row_of_its_own():
    rows = timeline_rows([frame(2, "assistant.delta", text="x"), frame(1, "user.message")])
    assert [r.frame and r.frame["seq"] for r in rows] == [2, 1]


def test_runs_apart_are_separate_rows():
    frames = [frame(s, "assistant.delta", text="a") for s in (9, 8)] + [frame(7, "tool.call")]
    frames += [frame(s, "assistant.delta", text="b") for s in (6, 5, 4)]
    rows = timeline_rows(frames)
    assert [len(r.deltas) for r in rows] == [2, 0, 3]


def emit(session, kind: str, **payload) -> None:
    services.event_emit(session_id=session.pk, type=kind, payload=payload)


def streamed(session, words: int) -> None:
    emit(session, "user.message", content="hi")
    for i in range(words):
        emit(session, "assistant.delta", text=f"word{i} ")
    emit(session, "turn.completed", stop_reason="end_turn")


@pytest.mark.django_db
def test_deltas_do_not_push_other_events_out_of_the_timeline():
    session = session_new()
    streamed(session, 100)
    streamed(session, 100)
    frames = selectors.timeline(session_id=session.pk, limit=3)
    assert [f["type"] for f in frames if f["type"] != "assistant.delta"] == [
        "turn.completed",
        "user.message",
        "turn.completed",
    ]
    # The deltas between those events, and none older.
    assert sum(f["type"] == "assistant.delta" for f in frames) == 100
    assert frames == sorted(frames, key=lambda f: -f["seq"])


@pytest.mark.django_db
def test_the_timeline_panel_shows_a_folded_run(operator_client):
    session = session_new()
    streamed(session, 40)
    html = operator_client.get(f"/sessions/{session.pk}/timeline/").content.decode()
    assert html.count("data-delta-group") == 1
    assert "<span data-delta-count>40</span> deltas" in html
    assert html.count("is-delta") == 40  # each inside the group, for its fields
    assert "word0 word1 word2" in html.split("data-delta-text>", 1)[1]


def test_a_status_change_says_the_status():
    from sessions_app.templatetags.dashboard import event_summary

    assert event_summary(frame(7, "session.status", status="idle")) == "idle"
