"""A section's changes inside an epoch, anchored where the prompt cache keeps them (issue 32;
DESIGN.md's cache-aware placement of the notepad): the first request that shows a change shows it
with the latest message, and every later request of the epoch shows it with that same stored
message, so that each request starts with what the previous one sent; the last copy the model
reads is the current one; past a share of the window a change is shown for one call only."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sessions_app.common.canonical import canonical_json
from sessions_app.engine.context import (
    ANCHORED_MAX_PER_EPOCH,
    ANCHORED_MESSAGE_MAX_TOKENS,
    ANCHORED_WINDOW_SHARE,
    CACHE_CONTROL,
    PreparedHistory,
    anchors_stale_after,
    build_request,
)
from sessions_app.engine.contract import ContextAnchor, HistoryView, SessionSnapshot
from tests.sessions_app.test_compaction_shared_summary import stripped
from tests.sessions_app.test_context import msg, snapshot, t
from tests.sessions_app.test_context_cache_layout import breakpoints, result, session_row, use

CC = CACHE_CONTROL
LEAD = "Changed since the system prompt's copy; the last copy is current:"


class Memo:
    """A section pinned for the epoch whose changes are shown as `LEAD` + its text."""

    name = "memo"

    def __init__(self, text: str, prefix: list[str] | None = None) -> None:
        self.text, self.prefix = text, prefix or []

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return ["Guidance."]

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        return [self.text]

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        return f"{LEAD}\n\n{texts[0]}" if texts else None

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return self.prefix


def history(steps: int, *, view: HistoryView | None = None) -> PreparedHistory:
    stored = [msg(0, "user", t("go"))]
    for n in range(steps):
        stored += [msg(2 * n + 1, "assistant", use(f"c{n}")), msg(2 * n + 2, "user", result(f"c{n}", 100))]
    return PreparedHistory(stored, view=view)


def build(session: SessionSnapshot, prepared: PreparedHistory, section: Memo, **kwargs: Any) -> Any:
    return build_request(
        session=session, history=prepared, server_tools=[], max_tokens=100, sections=[section], **kwargs
    )


def pinned(**overrides: Any) -> SessionSnapshot:
    return snapshot(pins={"memo": ("v1",)}, **overrides)


def texts(message: dict) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


def unmarked(value: Any) -> bytes:
    """`value`'s canonical JSON without its cache_control markers."""
    return canonical_json(stripped(value))


def stored_anchors(built: Any) -> tuple[ContextAnchor, ...]:
    return tuple(ContextAnchor(p, s, tuple(x)) for p, s, x in built.anchors_new)


def test_an_unchanged_pin_shows_nothing_and_anchors_nothing() -> None:
    built = build(pinned(), history(1), Memo("v1"))
    assert built.anchors_new is None
    assert all(LEAD not in text for m in built.body["messages"] for text in texts(m))


def test_a_change_is_anchored_at_the_latest_message_after_its_results_before_the_transient_blocks() -> None:
    built = build(pinned(), history(2), Memo("v2", prefix=["[scratch]"]))
    latest = built.body["messages"][-1]["content"]
    assert [b["type"] for b in latest] == ["tool_result", "text", "text"]
    assert latest[1]["text"] == f"{LEAD}\n\nv2" and latest[2]["text"] == "[scratch]"
    # The last breakpoint ends the anchored copy: the next request reads it from the cache.
    assert "cache_control" not in latest[0] and latest[1]["cache_control"] == CC
    assert "cache_control" not in latest[2]
    assert built.anchors_new == [[4, "memo", ["v2"]]]
    # Counted with the section's memory, so compaction's estimates see it.
    assert built.sections["memo"] > 0


def test_later_requests_show_the_change_where_it_was_anchored_and_start_as_the_previous_one() -> None:
    section = Memo("v2", prefix=["[scratch]"])
    first = build(pinned(), history(2), section)
    session = pinned(anchors=stored_anchors(first))
    later = build(session, history(4), section)
    assert later.anchors_new is None  # nothing new to anchor
    messages = later.body["messages"]
    assert texts(messages[4]) == [f"{LEAD}\n\nv2"]
    assert texts(messages[-1]) == ["[scratch]"]  # the copy is not shown twice
    # Every message up to the anchored copy is what the first request sent (breakpoints aside,
    # which are no part of the prefix): the cache reads it.
    assert unmarked(first.body["messages"][:4]) == unmarked(messages[:4])
    assert unmarked(first.body["messages"][4]["content"][:2]) == unmarked(messages[4]["content"])


def test_a_second_change_is_anchored_later_and_the_last_copy_read_is_the_current_one() -> None:
    first = build(pinned(), history(1), Memo("v2"))
    second = build(pinned(anchors=stored_anchors(first)), history(3), Memo("v3"))
    assert second.anchors_new == [[2, "memo", ["v2"]], [6, "memo", ["v3"]]]
    copies = [text for m in second.body["messages"] for text in texts(m) if text.startswith(LEAD)]
    assert copies == [f"{LEAD}\n\nv2", f"{LEAD}\n\nv3"]
    # Back to the pinned text: shown again, since the last copy read says otherwise.
    third = build(pinned(anchors=stored_anchors(second)), history(4), Memo("v1"))
    assert third.anchors_new is not None and third.anchors_new[-1] == [8, "memo", ["v1"]]


def test_at_most_four_breakpoints_with_anchored_copies_and_masking_anchors() -> None:
    prepared = history(8)
    prepared.mask("c0", "[masked]")
    prepared.mask_anchor = "c0"
    session = pinned(anchors=(ContextAnchor(4, "memo", ("v2",)), ContextAnchor(10, "memo", ("v3",))))
    built = build(session, prepared, Memo("v4", prefix=["[scratch]"]))
    assert len(breakpoints(built.body)) <= 4


def test_past_the_windows_share_a_change_is_shown_for_this_call_only() -> None:
    big = "w " * 2000  # about 2,000 tokens: over a tenth of a 10,000-token window
    assert ANCHORED_WINDOW_SHARE * 10_000 < 2000
    built = build(pinned(context_window=10_000), history(2), Memo(big, prefix=["[scratch]"]))
    assert built.anchors_new is None
    latest = built.body["messages"][-1]["content"]
    assert [b.get("text", "")[: len(LEAD)] for b in latest[1:]] == [LEAD, "[scratch]"]
    # The last breakpoint stays before the copy, which the next request will not send again.
    assert latest[0]["cache_control"] == CC and "cache_control" not in latest[1]


def test_past_the_epochs_number_of_anchors_a_change_is_shown_for_this_call_only() -> None:
    anchors = tuple(ContextAnchor(2 * n + 2, "memo", (f"v{n}",)) for n in range(ANCHORED_MAX_PER_EPOCH))
    built = build(pinned(anchors=anchors), history(ANCHORED_MAX_PER_EPOCH + 1), Memo("now"))
    assert built.anchors_new is None
    assert texts(built.body["messages"][-1]) == [f"{LEAD}\n\nnow"]
    # Each earlier one is still where it was anchored, before it.
    assert sum(text.startswith(LEAD) for m in built.body["messages"] for text in texts(m)) == len(anchors) + 1


def test_a_change_at_a_large_message_is_shown_for_this_call_and_anchored_at_the_next() -> None:
    prepared = history(1)  # positions 0-2
    prepared.append(msg(3, "assistant", t("ok")))
    prepared.append(replace(msg(4, "user", t("x")), token_estimate=ANCHORED_MESSAGE_MAX_TOKENS + 1))
    built = build(pinned(), prepared, Memo("v2"))
    assert built.anchors_new is None
    assert texts(built.body["messages"][-1]) == [f"{LEAD}\n\nv2", "x"]
    prepared.append(msg(5, "assistant", use("c9")))
    prepared.append(msg(6, "user", result("c9", 100)))
    later = build(pinned(), prepared, Memo("v2"))
    assert later.anchors_new == [[6, "memo", ["v2"]]]


def test_a_change_whose_message_the_view_hides_is_shown_again() -> None:
    # The anchored message is left out (a finished task's calls): the last copy the model would
    # read is the pinned one, so the current text is anchored anew at the latest message.
    view = HistoryView(hidden=frozenset({"c0"}))
    session = pinned(anchors=(ContextAnchor(2, "memo", ("v2",)),))
    built = build(session, history(3, view=view), Memo("v2"))
    assert built.anchors_new == [[2, "memo", ["v2"]], [6, "memo", ["v2"]]]
    copies = [text for m in built.body["messages"] for text in texts(m) if text.startswith(LEAD)]
    assert copies == [f"{LEAD}\n\nv2"]


def test_the_summary_question_shows_the_anchored_copies_and_anchors_none() -> None:
    prepared = history(2)
    ask = msg(-1, "user", t("Summarize."))
    question = PreparedHistory([*prepared.stored, ask])
    session = pinned(anchors=(ContextAnchor(2, "memo", ("v2",)),))
    built = build(session, question, Memo("v3"), question=True)
    assert built.anchors_new is None
    assert texts(built.body["messages"][2]) == [f"{LEAD}\n\nv2"]
    assert texts(built.body["messages"][-1]) == ["Summarize."]


def test_stale_anchored_copies_after_a_position_are_those_a_later_copy_replaces() -> None:
    session = pinned(
        anchors=(
            ContextAnchor(2, "memo", ("v2",)),
            ContextAnchor(6, "memo", ("v3",)),
            ContextAnchor(8, "memo", ("v4",)),
        )
    )
    stale, tokens = anchors_stale_after(session, 4)
    assert stale == [ContextAnchor(6, "memo", ("v3",))] and tokens > 0
    assert anchors_stale_after(session, 9) == ([], 0)
    assert anchors_stale_after(replace(session, anchors=()), 0) == ([], 0)


def test_anchors_are_read_for_their_epoch_only_and_odd_entries_are_left_out() -> None:
    good = [7, "notepad", ["## Session Notepad\nx"]]
    odd = [[True, "notepad", []], ["7", "notepad", []], [1, 2, []], [1, "notepad", [3]], [1, "notepad"], "x"]
    row = session_row(context_pins={"epoch": 2, "sections": {}, "anchors": [good, *odd, [3, "notepad", []]]})
    anchors = SessionSnapshot.from_session(row, defaults={}).anchors
    assert anchors == (
        ContextAnchor(3, "notepad", ()),
        ContextAnchor(7, "notepad", ("## Session Notepad\nx",)),
    )
    vars(row)["context_pins"] = {"epoch": 1, "sections": {}, "anchors": [good]}
    assert SessionSnapshot.from_session(row, defaults={}).anchors == ()
    vars(row)["context_pins"] = {"epoch": 2, "anchors": "broken"}
    assert SessionSnapshot.from_session(row, defaults={}).anchors == ()
