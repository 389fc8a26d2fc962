"""The built-in tools, as two features so that each keeps its place in the prompt's tool list:
`count_words` (the notepad sandbox API's example, offered with the notepad) and `fs_read`
(seed 004's executor, jailed to PALIMPSEST_FS_ROOT)."""

from __future__ import annotations

from sessions_app.builtin_tools.count_words import COUNT_WORDS
from sessions_app.builtin_tools.files import FS_READ_TOOL
from sessions_app.engine.contract import Feature

COUNT_WORDS_FEATURE = Feature(name="count_words", tools=[COUNT_WORDS])
FILES_FEATURE = Feature(name="files", tools=[FS_READ_TOOL])
