"""Every text the model reads about offloaded observations (seed 004), in one place.

The seed's own words are kept verbatim (`OFFLOAD_NOTE`, the binary summary, the schema's
property descriptions); the rest completes what the seed elides. The omission placeholder is the
engine's, shared with compaction (`sessions_app.common.content.OMITTED_MARKER`).
"""

from __future__ import annotations

# Seed 004, the synthetic observation's `_note`, verbatim.
OFFLOAD_NOTE = (
    "Large observation saved in scratchpad. To read it in full or partially, use the scratchpad_read tool."
)

# Seed 004's omission placeholder ("[... 88500 characters omitted ...]") is the engine's
# (`sessions_app.common.content.OMITTED_MARKER`): compaction's transcript cuts long texts with it too.

# Seed 004: "[BINARY: 45123 bytes, sha256=abc123def456...]" (the full hex digest here).
SUMMARY_BINARY = "[BINARY: {size} bytes, sha256={sha256}]"

# The seed's description starts "Reads from the scratchpad an observation previously saved..."
# and elides the rest; it goes on here with the modes, the two the seed names as its next step
# (lines, grep), and how to pass a full result to another tool.
SCRATCHPAD_READ_DESCRIPTION = (
    "Reads from the scratchpad an observation previously saved because it was too large to show in "
    "full, or masked to save context, under its `scratchpad_id`. Modes: head (default) or tail, `n` characters; range; lines; "
    "grep, numbered matching lines with `context` around them (like grep -n -C); full, for small "
    "ones only. Binary reads as base64, counted in bytes. To give another tool a full result, "
    "write {{stepN.field}} in its input: N numbers this turn's tool calls from 1, field is "
    "`content` or a metadata field."
)

# Seed 004's schema ("parameters" there; `input_schema` in the Anthropic API), with the seed's
# descriptions verbatim, plus the `lines` and `grep` modes.
SCRATCHPAD_READ_SCHEMA: dict = {
    "type": "object",
    "required": ["scratchpad_id"],
    "properties": {
        "scratchpad_id": {
            "type": "string",
            "description": "Id obtained from the 'scratchpad_id' field of a previous observation.",
        },
        "mode": {
            "type": "string",
            "enum": ["full", "head", "tail", "range", "lines", "grep"],
            "default": "head",
        },
        "n": {
            "type": "integer",
            "description": "For mode head/tail: number of characters to read. Default 2000.",
        },
        "start": {"type": "integer", "description": "For mode range: start index."},
        "end": {"type": "integer", "description": "For mode range: end index (exclusive)."},
        "start_line": {"type": "integer", "description": "For mode lines: first line, counted from 1."},
        "end_line": {
            "type": "integer",
            "description": "For mode lines: last line (inclusive). Default: start_line + 99.",
        },
        "pattern": {"type": "string", "description": "For mode grep: the regular expression to search for."},
        "context": {
            "type": "integer",
            "description": "For mode grep: lines shown before and after each match. Default 0.",
        },
        "max_matches": {
            "type": "integer",
            "description": "For mode grep: stop after this many matching lines. Default 50.",
        },
    },
}


# scratchpad_read's refusals of an id (the rest of its errors say what to fix where they arise).
READ_UNKNOWN_ID = (
    "No observation with scratchpad_id {observation_id!r} in this session. A scratchpad_id is the "
    "16-character `scratchpad_id` field of a synthetic observation (a large tool result that was "
    "saved); copy it exactly as that observation shows it."
)
READ_EXPIRED = (
    "The observation {observation_id} ({tool_name}, {size_bytes} bytes) expired at {expires_at}: "
    "saved results are kept for a limited time, and its content has been dropped. Call "
    "{tool_name} again for a fresh result; the summary you were given still shows its start and end."
)
READ_EARLIER_TURN = (
    "The observation {observation_id} belongs to an earlier turn: observations can be read only in "
    "the turn that produced them. Call {tool_name} again for a fresh result."
)
