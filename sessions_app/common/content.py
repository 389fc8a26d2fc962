"""The rules about message content that every part of the service shares: the text of content
(a message's, a tool result's: a string or a list of content blocks) and the omission marker of
a text cut in the middle (seed 004's `[... N characters omitted ...]`).

Plain functions, no database: the engine, the features and the dashboard all read content the
same way through these.
"""

from __future__ import annotations

import json
from typing import Any

# Seed 004: "the first 500 characters + a placeholder with the exact number of characters
# omitted + the last 500", shown in its example as "...\n[... 88500 characters omitted ...]\n...".
# `omitted_marker(n)` fills it in.
OMITTED_MARKER = "\n[... {omitted} characters omitted ...]\n"


def content_text(content: Any, *, sep: str = "", mark_other_blocks: bool = False) -> str:
    """The text of `content`: a string as it is; of a list of blocks, the texts of its `text`
    blocks joined with `sep` (what the model wrote reads joined with "", what a reader is shown
    with a line break or a blank line).

    With `mark_other_blocks` (showing a tool result to a reader: the dashboard, the summary
    call's transcript) every other block stands as `[<type> block]` in its place, and content
    that is neither a string nor a list is shown as JSON; without it, only text counts and such
    content has none.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif mark_other_blocks:
                parts.append(f"[{block.get('type')} block]")
        return sep.join(parts)
    return json.dumps(content, ensure_ascii=False) if mark_other_blocks else ""


def omitted_marker(omitted: int) -> str:
    """Seed 004's placeholder for `omitted` characters cut out of a text, its line breaks included."""
    return OMITTED_MARKER.format(omitted=omitted)


def text_clip_middle(text: str, *, head: int, tail: int) -> str:
    """`text` itself when it has at most `head + tail` characters; else its first `head` and its
    last `tail` characters around `omitted_marker` with the exact number left out."""
    if len(text) <= head + tail:
        return text
    return text[:head] + omitted_marker(len(text) - head - tail) + text[len(text) - tail :]


# PostgreSQL cannot store U+0000 in text or jsonb: what a model or a tool wrote is stored with the
# replacement character in its place, the same everywhere (messages, events, records, memory).
NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"


def nul_free(value: Any) -> Any:
    """`value` (text, or JSON of lists and objects) with every U+0000 replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace(NUL, NUL_REPLACEMENT) if NUL in value else value
    if isinstance(value, list):
        return [nul_free(v) for v in value]
    if isinstance(value, dict):
        return {nul_free(k): nul_free(v) for k, v in value.items()}
    return value
