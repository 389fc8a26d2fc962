"""`count_words` as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.count_words.tools import COUNT_WORDS
from sessions_app.engine.contract import Feature

FEATURE = Feature(name="count_words", tools=[COUNT_WORDS])
