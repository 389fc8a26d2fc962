"""Every text the model reads about `fs_read` (seed 004's executor): its description and schema."""

from __future__ import annotations

# The `encoding` that returns a file's bytes as base64 (observations keeps such a result as bytes).
BINARY_ENCODING = "binary"

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
