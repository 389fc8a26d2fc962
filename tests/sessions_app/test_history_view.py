"""History views (`PreparedHistory.view_set`): tool calls left out and results replaced in
requests, the stored messages untouched, roles alternating, recorded requests exact, and a view
change that encodes again only what it changed."""

from __future__ import annotations

from sessions_app.engine.context import PreparedHistory, StoredMessage, build_request
from sessions_app.engine.contract import HistoryView
from tests.sessions_app.test_context import Section, _rebuild, msg, snapshot, t


def use(tool_id: str, name: str = "x") -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def res(tool_id: str, content: str = "r") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def task_history() -> list[StoredMessage]:
    """A task (begin b, inner calls i1 i2, the user's words inside, end e), then more work."""
    return [
        msg(0, "user", t("start")),
        msg(1, "assistant", t("scoping"), use("b", "begin_task")),
        msg(2, "user", res("b", '{"ok": true}')),
        msg(3, "assistant", use("i1")),
        msg(4, "user", res("i1", "inner result one " * 20)),
        msg(5, "assistant", t("first half done")),
        msg(6, "user", t("the user's words inside the task")),
        msg(7, "assistant", use("i2"), use("e", "end_task")),
        msg(8, "user", res("i2", "inner two " * 20), res("e", '{"ok": true}')),
        msg(9, "assistant", t("after")),
        msg(10, "user", t("next")),
    ]


VIEW = HistoryView(frozenset({"i1", "i2"}), {"b": "Task «t» (finished): S"})


def build(history: PreparedHistory, prefix: tuple[str, ...] = ()) -> dict:
    built = build_request(
        session=snapshot(), history=history, server_tools=[], max_tokens=1, sections=[Section(prefix=prefix)]
    )
    assert _rebuild(built.record["messages"], history.stored) == built.body["messages"]
    return built.body


def blocks(body: dict) -> list[dict]:
    return [b for m in body["messages"] for b in m["content"]]


def test_a_view_leaves_out_inner_calls_and_shows_the_record_where_the_task_began():
    history = PreparedHistory(task_history(), view=VIEW)
    body = build(history)
    ids = {b.get("id") or b.get("tool_use_id") for b in blocks(body)}
    assert ids == {"b", "e", None}
    texts = [b["text"] for b in blocks(body) if b["type"] == "text"]
    assert "the user's words inside the task" in texts and "first half done" in texts
    record = next(b for b in blocks(body) if b.get("tool_use_id") == "b")
    assert record["content"] == "Task «t» (finished): S"
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))


def test_tool_results_still_open_their_message_after_a_view():
    body = build(PreparedHistory(task_history(), view=VIEW), prefix=("[memo]",))
    for message in body["messages"]:
        kinds = [b["type"] for b in message["content"]]
        first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
        assert "tool_result" not in kinds[first_other:]


def test_setting_a_view_later_builds_what_a_fresh_history_with_it_builds():
    stored = task_history()
    grown = PreparedHistory(stored[:9])
    build(grown)
    assert grown.view_set(VIEW)
    for message in stored[9:]:
        grown.append(message)
    fresh = PreparedHistory(stored, view=VIEW)
    assert build(grown, ("[m]",)) == build(fresh, ("[m]",))
    assert grown.token_total == fresh.token_total
    assert grown.collapse_savings == fresh.collapse_savings > 0


def test_a_view_change_keeps_the_encoded_bytes_of_unchanged_messages():
    history = PreparedHistory(task_history()[:9])
    build(history)
    before = list(history.encoded)
    history.view_set(VIEW)
    # The first two merged messages did not change: their bytes are reused, not encoded again.
    assert history.encoded[0] is before[0] and history.encoded[1] is before[1]
    assert not history.view_set(VIEW)  # the same view again changes nothing


def test_the_stored_messages_are_untouched_by_a_view():
    stored = task_history()
    copies = [list(m.content) for m in stored]
    history = PreparedHistory(stored, view=VIEW)
    build(history)
    assert [m.content for m in history.stored] == copies


def test_a_message_left_empty_is_left_out_and_its_neighbours_merge():
    stored = [
        msg(0, "user", t("go")),
        msg(1, "assistant", use("b", "begin_task")),
        msg(2, "user", res("b")),
        msg(3, "assistant", use("i1")),
        msg(4, "user", res("i1")),
        msg(5, "user", t("more words")),
        msg(6, "assistant", use("e", "end_task")),
        msg(7, "user", res("e")),
    ]
    body = build(PreparedHistory(stored, view=HistoryView(frozenset({"i1"}), {"e": "record"})))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == [res("b"), t("more words")]
    assert body["messages"][4]["content"][0]["content"] == "record"


def test_a_mask_on_a_hidden_result_changes_nothing():
    history = PreparedHistory(task_history(), view=VIEW)
    before = build(history)
    assert history.mask("i1", "[masked]") == 0
    assert build(history) == before
