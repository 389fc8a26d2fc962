"""A server tool's input is checked against its `input_schema` before its handler runs
(`common.tool_input`): one behaviour per test, then the turn loop's part."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sessions_app.common.tool_input import NOT_RUN, tool_input_check, tool_schema_unsupported
from sessions_app.engine.contract import Feature, ToolSpec
from sessions_app.engine.features import FeatureSet
from tests import features as test_features

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "Some text."},
        "mode": {"type": "string", "enum": ["head", "tail"], "default": "head"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "offset": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number", "maximum": 1},
        "all": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "filter": {
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "required": ["kind"],
        },
    },
    "required": ["text"],
}


def check(value: Any) -> str | None:
    return tool_input_check(SCHEMA, value, tool="probe")


def test_a_matching_input_passes() -> None:
    assert (
        check(
            {
                "text": "x",
                "mode": "tail",
                "limit": 100,
                "offset": 0,
                "ratio": 0.5,
                "all": False,
                "tags": ["a"],
                "grid": [[1, 2], []],
                "filter": {"kind": "k"},
            }
        )
        is None
    )


def test_a_missing_required_field_is_named_with_its_type() -> None:
    assert check({}) == f'probe needs "text": a string. {NOT_RUN}'


def test_a_required_field_given_as_null_is_missing() -> None:
    assert check({"text": None}) == f'probe needs "text": a string. {NOT_RUN}'


def test_an_optional_field_given_as_null_counts_as_not_given() -> None:
    assert check({"text": "x", "limit": None, "mode": None, "tags": None}) is None


def test_a_wrong_type_names_the_field_the_type_expected_and_the_type_given() -> None:
    assert check({"text": 42}) == f'probe: "text" must be a string, not an integer. {NOT_RUN}'


def test_a_boolean_is_not_an_integer() -> None:
    assert check({"text": "x", "offset": True}) == (
        f'probe: "offset" must be an integer of at least 0, not true or false. {NOT_RUN}'
    )


def test_a_whole_float_is_not_an_integer() -> None:
    assert check({"text": "x", "offset": 3.0}) == (
        f'probe: "offset" must be an integer of at least 0, not a number. {NOT_RUN}'
    )


def test_an_integer_is_a_number() -> None:
    assert check({"text": "x", "ratio": 1}) is None


def test_a_boolean_field_says_true_or_false() -> None:
    assert (
        check({"text": "x", "all": "yes"}) == f'probe: "all" must be true or false, not a string. {NOT_RUN}'
    )


def test_a_value_outside_the_enum_lists_the_choices() -> None:
    assert check({"text": "x", "mode": "sideways"}) == (
        f'probe: "mode" must be one of head, tail, not "sideways". {NOT_RUN}'
    )


def test_an_enum_compares_types_too() -> None:
    schema = {"type": "object", "properties": {"n": {"enum": [1, 2]}}}
    assert tool_input_check(schema, {"n": True}) == f'"n" must be one of 1, 2, not true. {NOT_RUN}'


def test_a_long_wrong_value_is_shown_cut() -> None:
    message = check({"text": "x", "mode": "y" * 500}) or ""
    assert "y" * 100 not in message and "…" in message


def test_below_the_minimum_is_refused_with_both_bounds() -> None:
    assert check({"text": "x", "limit": 0}) == (
        f'probe: "limit" must be an integer from 1 to 100, not 0. {NOT_RUN}'
    )


def test_above_the_maximum_is_refused() -> None:
    assert check({"text": "x", "limit": 101}) == (
        f'probe: "limit" must be an integer from 1 to 100, not 101. {NOT_RUN}'
    )


def test_a_bound_is_inclusive() -> None:
    assert check({"text": "x", "limit": 1, "offset": 0, "ratio": 1.0}) is None


def test_a_lone_maximum_is_worded_as_at_most() -> None:
    assert (
        check({"text": "x", "ratio": 1.5})
        == f'probe: "ratio" must be a number of at most 1, not 1.5. {NOT_RUN}'
    )


def test_an_array_item_of_the_wrong_type_is_named_by_its_index() -> None:
    assert check({"text": "x", "tags": ["a", "b", 3]}) == (
        f'probe: "tags[2]" must be a string, not an integer. {NOT_RUN}'
    )


def test_a_nested_array_item_is_named_by_both_indexes() -> None:
    assert check({"text": "x", "grid": [[1], [2, "3"]]}) == (
        f'probe: "grid[1][1]" must be an integer, not a string. {NOT_RUN}'
    )


def test_an_array_field_given_a_string_says_what_its_items_are() -> None:
    assert check({"text": "x", "tags": "a, b"}) == (
        f'probe: "tags" must be an array of strings, not a string. {NOT_RUN}'
    )


def test_a_nested_object_is_checked_by_its_own_schema() -> None:
    assert check({"text": "x", "filter": {}}) == f'probe needs "filter.kind": a string. {NOT_RUN}'


def test_extra_fields_are_allowed() -> None:
    assert check({"text": "x", "unheard_of": [1, {"a": None}]}) is None


def test_an_input_that_is_not_an_object_is_refused() -> None:
    assert check(["text"]) == f"probe's input must be an object, not an array. {NOT_RUN}"


def test_without_a_tool_name_the_message_says_this_call() -> None:
    assert tool_input_check(SCHEMA, {}) == f'This call needs "text": a string. {NOT_RUN}'


def test_the_subset_is_all_a_schema_may_use() -> None:
    assert tool_schema_unsupported(SCHEMA) == []
    bad = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "null"}},
    }
    assert tool_schema_unsupported(bad) == [
        "input_schema: 'additionalProperties'",
        "input_schema.properties.a: 'maxLength'",
        "input_schema.properties.b: type 'null'",
    ]


def test_a_tool_whose_schema_the_checker_cannot_check_is_refused_when_the_features_load() -> None:
    async def handler(ctx: Any, tool_input: dict) -> str:
        return ""

    spec = ToolSpec(
        "odd", "", {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}, handler
    )
    with pytest.raises(ValueError, match="odd.*pattern"):
        FeatureSet([Feature(name="a", tools=[spec])])


def test_every_tool_schema_of_the_features_is_within_the_subset() -> None:
    from sessions_app.engine.features import features

    assert {spec.name: tool_schema_unsupported(spec.input_schema) for spec in features().tools} == {
        spec.name: [] for spec in features().tools
    }


# ---------------------------------------------------------------------------
# Through the turn loop
# ---------------------------------------------------------------------------
@pytest.fixture
def counted_tool(settings: Any) -> Iterator[list[dict]]:
    settings.PALIMPSEST_FEATURES = [*settings.PALIMPSEST_FEATURES, "tests.features.COUNTED_FEATURE"]
    test_features.COUNTED_CALLS.clear()
    yield test_features.COUNTED_CALLS
    test_features.COUNTED_CALLS.clear()


async def test_a_call_whose_input_does_not_match_never_reaches_its_handler(
    connect: Any, counted_tool: list[dict]
) -> None:
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": 'tool test_counted {"n": "three"}'})
    frames = await client.until("turn.completed")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is True
    assert result["content"] == f'test_counted: "n" must be an integer of at least 1, not a string. {NOT_RUN}'
    assert counted_tool == []
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_call_whose_input_matches_reaches_its_handler(connect: Any, counted_tool: list[dict]) -> None:
    client = await connect()
    await client.create()
    await client.send({"type": "user.message", "content": 'tool test_counted {"n": 3}'})
    frames = await client.until("turn.completed")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert (result["is_error"], json.loads(result["content"])) == (False, {"n": 3})
    assert counted_tool == [{"n": 3}]
    await client.close()
