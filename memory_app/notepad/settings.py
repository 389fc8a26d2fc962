"""The session notepad's session settings (`Feature.settings`), with their rules, and the limits
its services share: the one place its defaults are written."""

from __future__ import annotations

from typing import Any

# The notepad is sent in full with every model call; this bounds what a runaway loop (e.g. a tool
# appending progress notes) can put there. The seed sets no size: this is ours.
NOTEPAD_MAX_CHARS = 100_000

# The text the notepad's revisions keep per session (`settings.notepad.history_max_chars`): past
# it, the oldest revisions lose their text (the newest is always kept whole). At least one full
# notepad, so the current text always fits.
NOTEPAD_HISTORY_MAX_CHARS = 2_000_000
NOTEPAD_HISTORY_MAX_CHARS_LIMIT = 100_000_000

# Where the `## Session Notepad` section goes (DESIGN.md, the notepad's cache-aware placement):
# `epoch`, in the system prompt as of the epoch's start, and the current notepad with the latest
# message whenever it changed since; `system`, rewritten in the system prompt at every edit;
# `message`, only with the latest message.
NOTEPAD_POSITION_EPOCH = "epoch"
NOTEPAD_POSITION_SYSTEM = "system"
NOTEPAD_POSITION_MESSAGE = "message"
NOTEPAD_POSITIONS = {NOTEPAD_POSITION_EPOCH, NOTEPAD_POSITION_SYSTEM, NOTEPAD_POSITION_MESSAGE}

SETTINGS: dict[str, Any] = {
    "notepad": {
        "enabled": True,
        "position": NOTEPAD_POSITION_EPOCH,
        "history_max_chars": NOTEPAD_HISTORY_MAX_CHARS,
    }
}
SETTINGS_RULES: dict[str, Any] = {
    "notepad": {
        "enabled": ("bool",),
        "position": ("choice", NOTEPAD_POSITIONS),
        "history_max_chars": ("int", NOTEPAD_MAX_CHARS, NOTEPAD_HISTORY_MAX_CHARS_LIMIT),
    }
}


def notepad_history_max_chars(settings: Any) -> int:
    """`settings.notepad.history_max_chars` of a session's stored settings, else the default (a
    session created before the setting existed stores none)."""
    notepad = settings.get("notepad") if isinstance(settings, dict) else None
    value = notepad.get("history_max_chars") if isinstance(notepad, dict) else None
    return value if type(value) is int else NOTEPAD_HISTORY_MAX_CHARS
