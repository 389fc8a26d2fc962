"""The code sandbox's texts the model reads (seed 000 names the tool; DESIGN.md fixes its schema)."""

from __future__ import annotations

RUN_SANDBOX_CODE_DESCRIPTION = (
    "Run Python 3 code in an isolated sandbox (no network, no access to the server's files, a "
    "private /tmp that is removed afterwards, limits on time, memory and processes). Returns "
    "{exit_code, stdout, stderr, timed_out, duration_ms}. Inside the code a global `session` gives "
    "the session notepad synchronously: session.notepad.read(), session.notepad.write(content), "
    "session.notepad.append(text) (exactly as given, no separator added): a long computation can "
    "leave progress notes that survive compaction. Only the Python standard library is available."
)

# The result says when output was cut (the schema's fields are kept as they are).
OUTPUT_TRUNCATED_NOTE = "\n[output truncated: only the first {limit} bytes of each stream were kept]"
