"""Every text the model reads about `count_words`: its description and schema."""

from __future__ import annotations

from typing import Any

COUNT_WORDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to count"}},
    "required": ["text"],
}

COUNT_WORDS_DESCRIPTION = (
    "Count the lines, words and characters of a text and list its most frequent words. Long texts "
    "are counted in chunks; after each chunk a progress line (`count_words: processed k/n ...`) is "
    "appended to the session notepad, if the session has one."
)
