"""`count_words`: a server tool, and the example of the notepad's sandbox API (seed 000).

It counts a (possibly long) text in chunks off the event loop, and after each chunk appends a
progress line to the session notepad, as the seed's "agent-authored tool doing a long operation"
does: if the turn is cancelled or the context compacted mid-way, the notepad still says how far it
got. At most COUNT_WORDS_MAX_PROGRESS_NOTES lines are added, however long the text.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from typing import Any

from memory_app.count_words.prompts import COUNT_WORDS_DESCRIPTION, COUNT_WORDS_SCHEMA
from memory_app.notepad.context import notepad_enabled
from memory_app.notepad.sandbox_api import notepad_of
from sessions_app.engine.contract import TextLimit, ToolContext, ToolSpec

COUNT_WORDS_MAX_PROGRESS_NOTES = 10
# The longest text counted (it is held and split in memory).
COUNT_WORDS_MAX_CHARS = 10_000_000
COUNT_WORDS_MIN_CHUNK_LINES = 500
COUNT_WORDS_TOP = 10
_WORD_RE = re.compile(r"\w+(?:['’-]\w+)*")


def _count_chunk(lines: list[str]) -> Counter[str]:
    words: Counter[str] = Counter()
    for line in lines:
        words.update(word.lower() for word in _WORD_RE.findall(line))
    return words


async def count_words(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    text: str = tool_input["text"]  # required, a string: checked against the schema
    lines = text.splitlines()
    chunk_lines = max(COUNT_WORDS_MIN_CHUNK_LINES, math.ceil(len(lines) / COUNT_WORDS_MAX_PROGRESS_NOTES))
    chunks = [lines[i : i + chunk_lines] for i in range(0, len(lines), chunk_lines)]
    notepad = notepad_of(ctx)
    words: Counter[str] = Counter()
    done_lines = 0
    for index, chunk in enumerate(chunks, start=1):
        # A thread, so that a long count does not stall the other sessions' turns in this process.
        words.update(await asyncio.to_thread(_count_chunk, chunk))
        done_lines += len(chunk)
        if notepad is not None:
            await notepad.append(
                f"count_words: processed {index}/{len(chunks)} "
                f"({done_lines} lines, {words.total()} words so far)\n"
            )
    return {
        "lines": len(lines),
        "words": words.total(),
        "characters": len(text),
        "top_words": [[word, count] for word, count in words.most_common(COUNT_WORDS_TOP)],
    }


COUNT_WORDS = ToolSpec(
    name="count_words",
    description=COUNT_WORDS_DESCRIPTION,
    input_schema=COUNT_WORDS_SCHEMA,
    handler=count_words,
    # The sandbox API's example: its progress notes go to the notepad, so it is offered with it.
    enabled=notepad_enabled,
    text_limits={"text": TextLimit(chars=COUNT_WORDS_MAX_CHARS, name="COUNT_WORDS_MAX_CHARS")},
)
