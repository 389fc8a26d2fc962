"""What a tool result becomes when offloaded (content, metadata, kind), the seed's summary, and
`{{stepN.field}}` substitution: pure functions."""

from __future__ import annotations

import base64
import json

import pytest

from memory_app.observations.content import (
    FieldMissing,
    ResultParts,
    iter_lines,
    parts_field,
    references_in,
    references_substitute,
    result_json_size,
    result_parts,
    summary_text,
    text_chunks,
)

B64 = base64.b64encode(b"\x00\x01\x02").decode()


def test_size_is_the_length_of_the_results_json() -> None:
    assert result_json_size({"a": "é"}) == len('{"a": "\\u00e9"}')


def test_object_with_string_content_splits_content_from_metadata() -> None:
    parts = result_parts({"path": "a.txt", "bytes": 3, "content": "abc"})
    assert (parts.kind, parts.text, parts.metadata, parts.content_is_json) == (
        "text",
        "abc",
        {"path": "a.txt", "bytes": 3},
        False,
    )


def test_object_with_binary_encoding_is_binary() -> None:
    parts = result_parts({"path": "z", "encoding": "binary", "content": B64})
    assert (parts.kind, parts.data, parts.metadata) == (
        "binary",
        b"\x00\x01\x02",
        {"path": "z", "encoding": "binary"},
    )


def test_object_with_binary_encoding_but_no_base64_stays_text() -> None:
    assert result_parts({"encoding": "binary", "content": "not base64!"}).kind == "text"


def test_object_without_string_content_is_its_json() -> None:
    parts = result_parts({"rows": [1, 2]})
    assert (parts.text, parts.metadata, parts.content_is_json) == ('{"rows": [1, 2]}', {}, True)


def test_object_with_huge_other_fields_is_its_json() -> None:
    parts = result_parts({"content": "abc", "headers": "h" * 5000})
    assert parts.content_is_json is True


def test_plain_string_is_the_content() -> None:
    assert result_parts("just text") == ResultParts("text", text="just text")


def test_json_object_string_is_read_as_the_object() -> None:
    parts = result_parts(json.dumps({"url": "u", "content": "body"}))
    assert (parts.text, parts.metadata) == ("body", {"url": "u"})


def test_text_blocks_are_joined() -> None:
    parts = result_parts([{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}])
    assert (parts.kind, parts.text) == ("text", "abcd")


def test_one_base64_document_block_is_binary() -> None:
    block = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": B64}}
    parts = result_parts([block])
    assert (parts.kind, parts.data, parts.metadata) == (
        "binary",
        b"\x00\x01\x02",
        {"type": "document", "media_type": "application/pdf"},
    )


def test_mixed_blocks_are_their_json() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "image", "source": {"type": "url", "url": "u"}}]
    assert result_parts(blocks).content_is_json is True


def test_summary_keeps_500_characters_each_side_and_counts_the_rest() -> None:
    content = "a" * 500 + "b" * 1234 + "c" * 500
    assert summary_text(content) == "a" * 500 + "\n[... 1234 characters omitted ...]\n" + "c" * 500


def test_summary_of_a_short_content_is_the_content() -> None:
    assert summary_text("x" * 1000) == "x" * 1000


def test_chunks_of_multibyte_text_count_bytes() -> None:
    assert [(c.start_char, c.start_byte) for c in text_chunks("ééé", 2)] == [(0, 0), (2, 4)]


def test_iter_lines_keeps_at_most_keep_characters_of_a_line() -> None:
    assert list(iter_lines(["abcdef\ngh", "i"], first_line=1, keep=3)) == [
        (1, "abc", True),
        (2, "ghi", False),
    ]


def test_references_are_found_in_nested_inputs_once_each() -> None:
    tool_input = {"a": "{{step1.content}} {{step2.path}}", "b": ["{{step1.content}}"], "{{step9.x}}": 1}
    assert references_in(tool_input) == [(1, "content"), (2, "path")]


def test_a_whole_string_reference_keeps_the_values_type() -> None:
    assert references_substitute({"n": "{{step1.bytes}}"}, lambda step, name: 42) == {"n": 42}


def test_an_embedded_reference_inserts_text_or_json() -> None:
    values = {"path": "a.txt", "meta": {"k": 1}}
    result = references_substitute("{{step1.path}} / {{step1.meta}}", lambda step, name: values[name])
    assert result == 'a.txt / {"k": 1}'


def test_text_without_references_is_unchanged() -> None:
    assert references_substitute("{{ nothing }} {step1.content}", lambda step, name: 1 / 0) == (
        "{{ nothing }} {step1.content}"
    )


def test_binary_content_field_is_base64() -> None:
    assert parts_field(ResultParts("binary", data=b"\x00\x01\x02"), "content") == B64


def test_missing_field_lists_the_fields_there_are() -> None:
    with pytest.raises(FieldMissing) as caught:
        parts_field(ResultParts("text", text="x", metadata={"path": "p"}), "size")
    assert caught.value.available == ["content", "path"]


def test_fields_of_a_json_result_are_its_keys() -> None:
    parts = ResultParts("text", text='{"status": 200}', content_is_json=True)
    assert (parts_field(parts, "status"), parts_field(parts, "content")) == (200, '{"status": 200}')
