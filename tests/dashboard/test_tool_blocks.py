"""Tool calls and results in the transcript: pretty-printed, long ones clipped with a "show all",
code shown as code, and everything a model or client wrote escaped."""

from __future__ import annotations

import json
from html import unescape

import pytest

from sessions_app.dashboard.transcript import (
    CLIP_LINES,
    FIELD_SHOWN_BELOW,
    SUMMARY_CHARS,
    Block,
    one_line,
    readable_blocks,
    result_value,
)
from sessions_app.models import ToolCall, Turn
from tests.dashboard.conftest import message_store, session_new

SCRIPT = "<script>alert('x')</script>"


# -- the blocks ----------------------------------------------------------------------------
def test_an_object_is_pretty_printed():
    (block,) = readable_blocks({"path": "a.txt", "n": 3})
    assert block.text == '{\n  "path": "a.txt",\n  "n": 3\n}'


def test_a_multi_line_field_is_a_block_of_its_own_under_its_name():
    head, content = readable_blocks({"path": "a.txt", "content": "line 1\nline 2"})
    assert json.loads(head.text) == {"path": "a.txt", "content": FIELD_SHOWN_BELOW}
    assert (content.label, content.text, content.code) == ("content", "line 1\nline 2", False)


def test_the_code_field_is_code():
    head, code = readable_blocks({"code": "print(1)", "timeout_seconds": 5}, code_field="code")
    assert json.loads(head.text) == {"code": FIELD_SHOWN_BELOW, "timeout_seconds": 5}
    assert (code.label, code.text, code.code) == ("code", "print(1)", True)


def test_an_object_of_only_long_fields_is_just_those_blocks():
    (code,) = readable_blocks({"code": "print(1)"}, code_field="code")
    assert (code.label, code.code) == ("code", True)
    assert readable_blocks({}) == [Block("{}")]


def test_plain_text_is_kept_as_it_is():
    assert readable_blocks("2 words") == [Block("2 words")]
    assert result_value("not {json") == "not {json"
    assert result_value('{"a": 1}') == {"a": 1}


def test_long_blocks_start_clipped():
    assert not Block("x\n" * (CLIP_LINES - 1)).long
    assert Block("x\n" * CLIP_LINES).long
    assert Block("x" * 5000).long and Block("x" * 5000).size == "5,000 characters"


def test_the_summary_is_one_short_line():
    summary = one_line({"text": "word " * 100, "nested": {"a": [1, 2]}})
    assert "\n" not in summary and len(summary) == SUMMARY_CHARS and summary.endswith("…")


# -- on the page -----------------------------------------------------------------------------
def _page(client, tool_input: dict, result: str, name: str = "run_sandbox_code") -> str:
    session = session_new()
    turn = Turn.objects.create(session=session)
    ToolCall.objects.create(session=session, turn=turn, tool_use_id="toolu_1", name=name, executor="server")
    message_store(
        session, "assistant", [{"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}]
    )
    message_store(session, "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}])
    html = client.get(f"/sessions/{session.pk}/").content.decode()
    return html.split('id="transcript-items"', 1)[1].split('id="streaming"', 1)[0]


@pytest.mark.django_db
def test_sandbox_code_is_shown_as_code_and_escaped(operator_client):
    code = f"print('{SCRIPT}')\nfor i in range(3):\n    print(i)"
    html = _page(operator_client, {"code": code}, '{"exit_code": 0, "stdout": "0\\n1\\n2\\n", "stderr": ""}')
    assert '<pre class="code"><code>' in html
    shown = html.split('<pre class="code"><code>', 1)[1].split("</code></pre>", 1)[0]
    assert unescape(shown) == code
    assert SCRIPT not in html


@pytest.mark.django_db
def test_a_json_result_is_pretty_printed_with_its_content_apart(operator_client):
    result = json.dumps({"path": "notes.md", "content": "# Title\n\nBody <b>bold</b>\n"})
    html = _page(operator_client, {"path": "notes.md"}, result, name="fs_read")
    result_html = html.split('class="tool-result"', 1)[1]
    assert "{\n  &quot;path&quot;: &quot;notes.md&quot;," in result_html
    assert '<div class="block-label">content</div>' in result_html
    assert "# Title\n\nBody &lt;b&gt;bold&lt;/b&gt;\n</pre>" in result_html


@pytest.mark.django_db
def test_a_long_result_starts_clipped_with_show_all(operator_client):
    result = json.dumps({"content": "".join(f"line {i}\n" for i in range(200))})
    html = _page(operator_client, {"path": "big.txt"}, result, name="fs_read")
    result_html = html.split('class="tool-result"', 1)[1]
    assert '<div class="tool-block clip">' in result_html
    assert "show all (201 lines)" in result_html
    assert "line 199" in result_html  # all of it is there, clipped by CSS until opened


@pytest.mark.django_db
def test_a_short_result_is_not_clipped(operator_client):
    html = _page(operator_client, {"text": "a b"}, '{"words": 2}', name="count_words")
    assert "tool-block clip" not in html and "show all" not in html
