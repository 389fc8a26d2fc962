"""The cache-aware request layout (issue 32): what sections pin for an epoch stays inside the
cached prefix; the history's breakpoints sit where masking will change it; never more than the
provider's four breakpoints."""

from __future__ import annotations

from typing import Any

from sessions_app.engine.context import CACHE_CONTROL, PreparedHistory, StoredMessage, build_request
from sessions_app.engine.contract import SessionSnapshot
from tests.sessions_app.test_context import msg, snapshot, t

CC = CACHE_CONTROL


class Pinning:
    name = "pinning"

    def __init__(self, pinned: list[str], prefix: list[str] | None = None) -> None:
        self.pinned, self.prefix, self.calls = pinned, prefix or [], 0

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return ["Guidance."]

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        self.calls += 1
        return self.pinned

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        return None  # `test_context_anchors.py` shows changes

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return self.prefix


def use(tool_use_id: str) -> dict:
    return {"type": "tool_use", "id": tool_use_id, "name": "fs_read", "input": {}}


def result(tool_use_id: str, size: int = 2000) -> dict:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": "x" * size}


def steps(count: int) -> list[StoredMessage]:
    """A user message, then `count` steps of a tool call and its result."""
    stored = [msg(0, "user", t("go"))]
    for n in range(count):
        stored += [msg(2 * n + 1, "assistant", use(f"c{n}")), msg(2 * n + 2, "user", result(f"c{n}"))]
    return stored


def breakpoints(body: dict) -> list[tuple[str, Any]]:
    marks: list[tuple[str, Any]] = []
    marks += [("tools", i) for i, b in enumerate(body.get("tools", [])) if "cache_control" in b]
    marks += [("system", i) for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        marks += [("messages", (m, i)) for i, b in enumerate(message["content"]) if "cache_control" in b]
    return marks


def build(session: SessionSnapshot, history: PreparedHistory, sections: list[Any]) -> Any:
    return build_request(session=session, history=history, server_tools=[], max_tokens=100, sections=sections)


def test_a_sections_pinned_text_follows_the_stable_system_prompt_and_is_recorded_as_new() -> None:
    section = Pinning(["## Pinned\nv1"])
    built = build(snapshot(system_prompt="Be brief."), PreparedHistory([msg(0, "user", t("hi"))]), [section])
    assert built.body["system"] == [
        {"type": "text", "text": "Be brief.\n\nGuidance.", "cache_control": CC},
        {"type": "text", "text": "## Pinned\nv1"},
    ]
    assert built.pins_new == {"pinning": ["## Pinned\nv1"]}
    assert built.sections["pinning"] > 0


def test_what_is_pinned_for_the_epoch_is_shown_whatever_the_section_gives_now() -> None:
    section = Pinning(["## Pinned\nv2"])
    session = snapshot(pins={"pinning": ("## Pinned\nv1",)})
    built = build(session, PreparedHistory([msg(0, "user", t("hi"))]), [section])
    assert built.body["system"][-1]["text"] == "## Pinned\nv1"
    # The section is asked what it gives now only to show a change (`pinned_changed`; this
    # section shows none): nothing is pinned again.
    assert (built.pins_new, built.anchors_new, section.calls) == (None, None, 1)


def test_a_section_without_a_pin_in_an_epoch_with_pins_is_added_to_them() -> None:
    session = snapshot(pins={"other": ("kept",)})
    built = build(session, PreparedHistory([msg(0, "user", t("hi"))]), [Pinning(["new"])])
    assert built.pins_new == {"other": ["kept"], "pinning": ["new"]}


def test_pinned_text_alone_carries_the_systems_breakpoint() -> None:
    class Bare(Pinning):
        def static_system(self, session: SessionSnapshot) -> list[str]:
            return []

    built = build(snapshot(), PreparedHistory([msg(0, "user", t("hi"))]), [Bare(["pinned"])])
    assert built.body["system"] == [{"type": "text", "text": "pinned", "cache_control": CC}]


def session_row(**fields: Any) -> Any:
    """A stand-in for a session row, as `SessionSnapshot.from_session` reads it."""

    class Row:
        pass

    row = Row()
    values = {
        "id": snapshot().id,
        "model": "m",
        "system_prompt": "",
        "context_window": 1000,
        "compact_threshold": 0.8,
        "settings": {},
        "client_tools": [],
        "epoch": 2,
        "last_prompt_tokens": None,
        "last_estimated_tokens": None,
        "token_ratio": 1.0,
        "compaction_failures": 0,
        "depth": 0,
        "parent_session_id": None,
        "root_session_id": None,
    }
    vars(row).update({**values, **fields})
    return row


def test_pins_of_another_epoch_are_not_this_epochs() -> None:
    row = session_row(context_pins={"epoch": 1, "sections": {"notepad": ["old"]}})
    assert SessionSnapshot.from_session(row, defaults={}).pins is None
    vars(row)["context_pins"] = {"epoch": 2, "sections": {"notepad": ["now"]}}
    assert SessionSnapshot.from_session(row, defaults={}).pinned("notepad") == ("now",)
    vars(row)["context_pins"] = {"epoch": 2, "sections": "broken"}
    assert SessionSnapshot.from_session(row, defaults={}).pins is None


def test_a_breakpoint_sits_before_the_oldest_result_masking_may_take_next() -> None:
    history = PreparedHistory(steps(6))
    built = build(snapshot(), history, [])
    # keep_recent 3: the oldest result masking may take is c0's, in messages[2]; the block
    # before it is c0's tool_use, the last block of messages[1].
    assert breakpoints(built.body) == [("messages", (1, 0)), ("messages", (12, 0))]


def test_after_a_batch_the_request_keeps_the_earlier_breakpoint_and_adds_the_next() -> None:
    history = PreparedHistory(steps(8))
    history.mask_anchor = history.first_unmasked_result(3)
    for n in range(3):
        history.mask(f"c{n}", f"[masked c{n}]")
    built = build(snapshot(), history, [])
    assert history.first_unmasked_result(3) == "c3"
    # Before c0 (where the requests before the batch had theirs), before c3 (the next), the tail.
    assert breakpoints(built.body) == [("messages", (1, 0)), ("messages", (7, 0)), ("messages", (16, 0))]


def test_never_more_than_four_breakpoints() -> None:
    history = PreparedHistory(steps(10))
    history.mask_anchor = "c0"
    history.mask("c0", "[masked]")
    section = Pinning(["pinned"], prefix=["## Transient"])
    built = build(snapshot(system_prompt="s"), history, [section])
    assert len(breakpoints(built.body)) == 4


def test_no_history_breakpoint_before_the_tail_without_results_to_mask() -> None:
    history = PreparedHistory(steps(3))  # all three are the newest kept whole
    built = build(snapshot(), history, [])
    assert breakpoints(built.body) == [("messages", (6, 0))]


def test_a_masked_or_hidden_result_is_not_where_the_next_batch_begins() -> None:
    history = PreparedHistory(steps(6))
    history.mask("c0", "[masked]")
    assert history.first_unmasked_result(3) == "c1"
    assert history.first_unmasked_result(6) is None
