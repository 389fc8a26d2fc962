"""The texts of the built-in tools the model reads (seed 004's `fs_read` executor; `count_words`
keeps its own next to its schema)."""

from __future__ import annotations

from typing import Any

FS_READ_DESCRIPTION = (
    "Reads a file from the server's shared folder. `path` is relative to that folder (an absolute "
    "path must lie inside it). Text is decoded with `encoding` (default utf-8); `encoding: "
    "binary` returns the bytes as base64. The result has `path`, `bytes`, `encoding` and "
    "`content`; a large one is saved in the scratchpad (read it with scratchpad_read)."
)

FS_READ_SCHEMA: dict = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string", "description": "The file's path inside the shared folder."},
        "encoding": {
            "type": "string",
            "enum": ["utf-8", "latin-1", "ascii", "utf-16", "binary"],
            "default": "utf-8",
        },
    },
}

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
