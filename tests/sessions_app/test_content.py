"""The shared rules about content: its text, who wrote it, and a text cut in the middle."""

from __future__ import annotations

from sessions_app.authors import AGENT_AUTHOR, operator_author
from sessions_app.common.content import content_text, omitted_marker, text_clip_middle

BLOCKS = [
    {"type": "text", "text": "one"},
    {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
    "not a block",
    {"type": "text", "text": "two"},
]


def test_content_text_of_a_string_is_the_string() -> None:
    assert content_text("plain") == "plain"


def test_content_text_joins_the_text_blocks_with_the_separator_asked_for() -> None:
    assert content_text(BLOCKS) == "onetwo"
    assert content_text(BLOCKS, sep="\n") == "one\ntwo"
    assert content_text(BLOCKS, sep="\n\n") == "one\n\ntwo"


def test_content_text_marks_other_blocks_in_their_place_when_asked() -> None:
    assert content_text(BLOCKS, sep="\n", mark_other_blocks=True) == "one\n[image block]\ntwo"


def test_content_text_of_other_content_is_empty_or_its_json() -> None:
    assert content_text({"a": 1}) == ""
    assert content_text(None) == ""
    assert content_text({"a": "é"}, mark_other_blocks=True) == '{"a": "é"}'


def test_omitted_marker_is_seed_004s_placeholder() -> None:
    assert omitted_marker(88500) == "\n[... 88500 characters omitted ...]\n"


def test_text_clip_middle_keeps_a_short_text_whole() -> None:
    assert text_clip_middle("x" * 10, head=5, tail=5) == "x" * 10


def test_text_clip_middle_keeps_head_and_tail_and_counts_what_it_left_out() -> None:
    text = "a" * 5 + "b" * 7 + "c" * 3
    assert text_clip_middle(text, head=5, tail=3) == "aaaaa\n[... 7 characters omitted ...]\nccc"
    assert text_clip_middle(text, head=2, tail=0) == "aa\n[... 13 characters omitted ...]\n"


def test_authors_are_the_agent_or_an_operator_by_username() -> None:
    assert AGENT_AUTHOR == "agent"
    assert operator_author("alice") == "operator:alice"
