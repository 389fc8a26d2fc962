"""Request building: layout, cache breakpoints, transient blocks, the reference record."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sessions_app.common.request_record import message_rebuilt
from sessions_app.engine.context import (
    CACHE_CONTROL,
    PreparedHistory,
    StoredMessage,
    build_request,
    canonical_json,
)
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.features import features

CC = CACHE_CONTROL


def snapshot(**overrides) -> SessionSnapshot:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "model": "m",
        "system_prompt": "",
        "context_window": 200_000,
        "compact_threshold": 0.8,
        "settings": features().default_settings,
        "client_tools": [],
    }
    values.update(overrides)
    return SessionSnapshot(**values)


def msg(position: int, role: str, *blocks: dict) -> StoredMessage:
    return StoredMessage(position, role, list(blocks), 10)


def t(text: str) -> dict:
    return {"type": "text", "text": text}


class Section:
    def __init__(self, static=(), dynamic=(), prefix=()):
        self.static, self.dynamic, self.prefix = list(static), list(dynamic), list(prefix)

    def static_system(self, session):
        return self.static

    def pinned_system(self, session):
        return []

    def pinned_changed(self, session, texts):
        return None

    def dynamic_system(self, session):
        return self.dynamic

    def message_prefix(self, session):
        return self.prefix


def test_stable_system_ends_with_breakpoint_and_dynamic_sections_follow():
    built = build_request(
        session=snapshot(system_prompt="Be brief."),
        history=[msg(0, "user", t("hi"))],
        server_tools=[],
        max_tokens=100,
        sections=[Section(static=["Guidance."], dynamic=["## Live\nnow"])],
    )
    assert built.body["system"] == [
        {"type": "text", "text": "Be brief.\n\nGuidance.", "cache_control": CC},
        {"type": "text", "text": "## Live\nnow"},
    ]


def test_without_system_text_the_last_tool_carries_the_breakpoint():
    tool = {"name": "x", "description": "", "input_schema": {"type": "object"}}
    built = build_request(
        session=snapshot(client_tools=[tool]),
        history=[msg(0, "user", t("hi"))],
        server_tools=[],
        max_tokens=1,
        sections=[],
    )
    assert "system" not in built.body
    assert built.body["tools"] == [{**tool, "cache_control": CC}]


def test_breakpoint_on_last_message_when_nothing_is_injected():
    history = [msg(0, "user", t("a")), msg(1, "assistant", t("b")), msg(2, "user", t("c"))]
    built = build_request(session=snapshot(), history=history, server_tools=[], max_tokens=1, sections=[])
    assert built.body["messages"][-1]["content"] == [{**t("c"), "cache_control": CC}]
    assert built.record["messages"][0] == {"$messages": [0, 1]}


def test_transient_blocks_go_before_latest_user_text_and_after_the_breakpoint():
    history = [msg(0, "user", t("a")), msg(1, "assistant", t("b")), msg(2, "user", t("c"))]
    built = build_request(
        session=snapshot(),
        history=history,
        server_tools=[],
        max_tokens=1,
        sections=[Section(prefix=["[memo]"])],
    )
    messages = built.body["messages"]
    assert messages[0] == {"role": "user", "content": [t("a")]}
    assert messages[1] == {"role": "assistant", "content": [{**t("b"), "cache_control": CC}]}
    assert messages[2] == {"role": "user", "content": [t("[memo]"), t("c")]}


def test_transient_blocks_follow_tool_results_in_their_message_which_is_recorded_by_position():
    result = {"type": "tool_result", "tool_use_id": "x", "content": "r" * 5000}
    history = [
        msg(0, "user", t("a")),
        msg(1, "assistant", {"type": "tool_use", "id": "x", "name": "n", "input": {}}),
        msg(2, "user", result),
    ]
    built = build_request(
        session=snapshot(),
        history=history,
        server_tools=[],
        max_tokens=1,
        sections=[Section(prefix=["[memo]"])],
    )
    # The breakpoint stays on the stored tool result, before the injected block.
    assert built.body["messages"][2]["content"] == [{**result, "cache_control": CC}, t("[memo]")]
    assert built.body["messages"][1]["content"][0].get("cache_control") is None
    # The record names the stored blocks it sent and what it added, not the large result again.
    assert built.record["messages"] == [
        {"$messages": [0, 1]},
        {"$message": 2, "$content": [{"$block": 0, "cache_control": CC}, t("[memo]")]},
    ]
    assert _rebuild(built.record["messages"], history) == built.body["messages"]
    assert len(json.dumps(built.record)) < 1000


def test_transient_blocks_go_before_the_latest_stored_message_inside_a_merged_one():
    history = [msg(0, "user", t("summary")), msg(1, "user", t("question"))]
    built = build_request(
        session=snapshot(),
        history=history,
        server_tools=[],
        max_tokens=1,
        sections=[Section(prefix=["[memo]"])],
    )
    assert built.body["messages"] == [
        {"role": "user", "content": [{**t("summary"), "cache_control": CC}, t("[memo]"), t("question")]}
    ]


def test_consecutive_user_messages_are_merged_and_recorded_whole():
    result = {"type": "tool_result", "tool_use_id": "x", "content": "r"}
    history = [
        msg(0, "user", t("a")),
        msg(1, "assistant", {"type": "tool_use", "id": "x", "name": "n", "input": {}}),
        msg(2, "user", result),
        msg(3, "user", t("next")),
    ]
    built = build_request(session=snapshot(), history=history, server_tools=[], max_tokens=1, sections=[])
    assert len(built.body["messages"]) == 3
    assert built.body["messages"][2] == {
        "role": "user",
        "content": [result, {**t("next"), "cache_control": CC}],
    }
    # Merged of two stored messages: sent whole.
    assert built.record["messages"] == [{"$messages": [0, 1]}, built.body["messages"][2]]


def test_building_never_mutates_the_stored_history():
    history = [msg(0, "user", t("a"))]
    build_request(
        session=snapshot(),
        history=history,
        server_tools=[],
        max_tokens=1,
        sections=[Section(prefix=["[memo]"])],
    )
    build_request(session=snapshot(), history=history, server_tools=[], max_tokens=1, sections=[])
    assert history[0].content == [t("a")]


def test_estimate_adds_up_its_parts():
    built = build_request(
        session=snapshot(system_prompt="sys"),
        history=[msg(0, "user", t("a"))],
        server_tools=[],
        max_tokens=1,
        sections=[Section(dynamic=["dyn"], prefix=["pre"])],
    )
    assert built.breakdown["history"] == 10
    assert built.estimated_tokens == sum(built.breakdown.values())
    assert all(built.breakdown[k] > 0 for k in ("system", "dynamic_system", "transient"))


def test_common_prefix_length_of_two_requests():
    from sessions_app.engine.prefix import PREFIX_COMPARE_BLOCK
    from sessions_app.engine.prefix import common_prefix_length as _common_prefix_length

    big = b"x" * (3 * PREFIX_COMPARE_BLOCK + 17)
    assert _common_prefix_length(b"", b"abc") == 0
    assert _common_prefix_length(b"abc", b"abc") == 3
    assert _common_prefix_length(b"abc", b"abcd") == 3
    assert _common_prefix_length(b"abcd", b"abc") == 3
    assert _common_prefix_length(b"abcdef", b"abcxyz") == 3
    assert _common_prefix_length(b"zbc", b"abc") == 0
    for cut in (
        0,
        1,
        PREFIX_COMPARE_BLOCK - 1,
        PREFIX_COMPARE_BLOCK,
        2 * PREFIX_COMPARE_BLOCK + 5,
        len(big) - 1,
    ):
        other = big[:cut] + b"y" + big[cut + 1 :]
        assert _common_prefix_length(big, other) == cut


def _history_mixed() -> list[StoredMessage]:
    result = {"type": "tool_result", "tool_use_id": "x", "content": "r"}
    return [
        msg(0, "user", t("a")),
        msg(1, "assistant", {"type": "tool_use", "id": "x", "name": "n", "input": {}}),
        msg(2, "user", result),
        msg(3, "user", t("after max steps")),  # merged with the results above
        msg(4, "assistant", t("b")),
        msg(5, "user", t("c")),
        msg(6, "assistant", t("d")),
        msg(7, "user", t("e")),
    ]


def _rebuild(record: list[dict], history: list[StoredMessage]) -> list[dict]:
    by_position = {m.position: m for m in history}
    out: list[dict] = []
    for item in record:
        if "$messages" in item:
            first, last = item["$messages"]
            out += [
                {"role": by_position[p].role, "content": by_position[p].content}
                for p in range(first, last + 1)
            ]
        elif "$message" in item:
            stored = by_position[item["$message"]]
            rebuilt = message_rebuilt(item, stored.role, stored.content)
            assert rebuilt is not None
            out.append(rebuilt)
        else:
            out.append(item)
    return out


def test_record_rebuilds_the_exact_messages_around_merges_and_changes():
    history = _history_mixed()
    for sections in ([], [Section(prefix=["[memo]"])]):
        built = build_request(
            session=snapshot(), history=history, server_tools=[], max_tokens=1, sections=sections
        )
        assert _rebuild(built.record["messages"], history) == built.body["messages"]
        assert len(built.record["messages"]) < len(built.body["messages"])


def test_encoded_request_is_exactly_its_json():
    tool = {"name": "x", "description": "é", "input_schema": {"type": "object"}}
    built = build_request(
        session=snapshot(system_prompt="sys ✓", client_tools=[tool]),
        history=_history_mixed(),
        server_tools=[],
        max_tokens=9,
        sections=[Section(dynamic=["live"], prefix=["[memo]"])],
    )
    assert built.encoded == canonical_json(built.body)
    assert json.loads(built.encoded) == built.body
    # Keys sorted inside; the request's own keys in prompt order: tools, system, messages.
    keys = (b'"max_tokens"', b'"model"', b'"tools"', b'"system"', b'"messages"')
    order = [built.encoded.index(key) for key in keys]
    assert order == sorted(order)
    inner = json.dumps(built.body["messages"], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert built.encoded.endswith(f'"messages":{inner}}}'.encode())


def test_the_record_names_the_tools_by_the_hash_of_their_json_as_sent():
    """The record keeps the tools as `{"$part": sha256}`; the part is their canonical JSON, as the
    request's bytes carry it; without tools there is no part."""
    import hashlib

    tool = {"name": "x", "description": 'é \\ "q"', "input_schema": {"type": "object"}}
    built = build_request(
        session=snapshot(system_prompt="sys ✓", client_tools=[tool]),
        history=_history_mixed(),
        server_tools=[],
        max_tokens=9,
        sections=[Section(prefix=["[memo]"])],
    )
    ((digest, text),) = built.parts.items()
    assert built.record["tools"] == {"$part": digest} == {"$part": hashlib.sha256(text.encode()).hexdigest()}
    assert json.loads(text) == built.body["tools"]
    assert f'"tools":{text}'.encode() in built.encoded
    assert {k: v for k, v in built.record.items() if k not in ("tools", "messages")} == {
        k: v for k, v in built.body.items() if k not in ("tools", "messages")
    }
    bare = build_request(
        session=snapshot(), history=_history_mixed(), server_tools=[], max_tokens=9, sections=[]
    )
    assert bare.parts == {} and "tools" not in bare.record


def test_server_tools_encoded_once_encode_as_the_request_carries_them():
    """The server's tools' JSON is encoded once per `ToolSpec` and reused: the request's bytes,
    and the tools' token count, are what encoding the whole request would give, whether the
    last tool carries the cache breakpoint (no system text) or not, beside client tools."""
    from sessions_app.common.estimate import estimate_text_tokens, json_text
    from sessions_app.engine.contract import ToolSpec

    async def handler(ctx: Any, tool_input: dict) -> str:
        return ""

    specs = [
        ToolSpec(
            name=f"server_{n}",
            description='Reads ✓ "quoted"',
            input_schema={
                "type": "object",
                "properties": {"z": {"type": "string"}, "a": {"type": "integer"}},
            },
            handler=handler,
        )
        for n in range(3)
    ]
    client = {"name": "client", "description": "é", "input_schema": {"type": "object"}}
    for system_prompt, client_tools in (("sys", []), ("", []), ("", [client]), ("sys", [client])):
        for _ in range(2):  # the second build reuses the specs' encoded definitions
            built = build_request(
                session=snapshot(system_prompt=system_prompt, client_tools=client_tools),
                history=_history_mixed(),
                server_tools=specs,
                max_tokens=9,
                sections=[],
            )
            assert built.encoded == canonical_json(built.body)
            assert built.breakdown["tools"] == estimate_text_tokens(json_text(built.body["tools"]))
            marked = [t for t in built.body["tools"] if "cache_control" in t]
            assert len(marked) == (0 if system_prompt else 1)


def test_prepared_history_grown_step_by_step_builds_what_a_fresh_one_builds():
    history = _history_mixed()
    grown = PreparedHistory()
    for index, message in enumerate(history):
        grown.append(message)
        fresh = build_request(
            session=snapshot(),
            history=history[: index + 1],
            server_tools=[],
            max_tokens=1,
            sections=[Section(prefix=["[m]"])],
        )
        again = build_request(
            session=snapshot(),
            history=grown,
            server_tools=[],
            max_tokens=1,
            sections=[Section(prefix=["[m]"])],
        )
        assert (again.body, again.record, again.encoded) == (fresh.body, fresh.record, fresh.encoded)
    # Building never altered what later steps share.
    assert grown.messages[0] == {"role": "user", "content": [t("a")]}


def test_each_section_reports_its_tokens_under_its_name():
    named = Section(static=["Guidance " * 10], dynamic=["## Live\nnow"], prefix=["[memo] " * 5])
    named.name = "memo"  # type: ignore[attr-defined]
    built = build_request(
        session=snapshot(system_prompt="sys"),
        history=[msg(0, "user", t("a"))],
        server_tools=[],
        max_tokens=1,
        sections=[named, Section(dynamic=["other"])],
    )
    assert built.sections["memo"] > 0
    assert built.sections["Section"] > 0  # no name: the class name
    # Per-call parts only: the stable guidance is the system prompt's.
    assert sum(built.sections.values()) == built.breakdown["dynamic_system"] + built.breakdown["transient"]


def test_a_sections_guidance_counts_in_the_system_prompt_not_under_its_name():
    guided = Section(static=["Guidance " * 50])
    guided.name = "memo"  # type: ignore[attr-defined]
    built = build_request(
        session=snapshot(system_prompt=""), history=[], server_tools=[], max_tokens=1, sections=[guided]
    )
    assert built.sections["memo"] == 0
    assert built.breakdown["system"] >= 50


def test_the_tools_tokens_are_those_of_their_json_as_sent_and_follow_a_change():
    from sessions_app.common.estimate import estimate_json_tokens

    tool = {"name": "lookup", "description": "Find a word.", "input_schema": {"type": "object"}}
    first = build_request(
        session=snapshot(client_tools=[tool]), history=[], server_tools=[], max_tokens=1, sections=[]
    )
    assert first.breakdown["tools"] == estimate_json_tokens([{**tool, "cache_control": CC}])
    longer = {**tool, "description": "Find a word in the dictionary, with its senses. " * 20}
    second = build_request(
        session=snapshot(client_tools=[longer]), history=[], server_tools=[], max_tokens=1, sections=[]
    )
    assert second.breakdown["tools"] == estimate_json_tokens([{**longer, "cache_control": CC}])
    assert second.breakdown["tools"] > first.breakdown["tools"] + 100


def test_a_recorded_message_that_does_not_fit_its_stored_one_is_not_rebuilt():
    content = [t("a"), t("b")]
    assert message_rebuilt({"$message": 0, "$content": [1, 0, t("new")]}, "user", content) == {
        "role": "user",
        "content": [t("b"), t("a"), t("new")],
    }
    for parts in ([2], [-1], [True], ["0"], [{"$block": 5, "cache_control": CC}], "x"):
        assert message_rebuilt({"$message": 0, "$content": parts}, "user", content) is None
    assert message_rebuilt({"$message": 0, "$content": [0]}, "user", None) is None
