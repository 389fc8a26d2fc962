"""`grep` over an offloaded observation (the mode seed 004 lists as its next step).

It streams the chunks in small batches (`selectors.chunks_from`) and keeps at most one (capped)
line plus the context lines in memory, so its memory does not grow with the observation.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import regex

from memory_app.observations.content import iter_lines
from memory_app.observations.models import Observation
from memory_app.observations.selectors import (
    READ_MAX_CHARS,
    ObservationReadError,
    chunks_from,
    int_arg,
    text_only,
)

# The pattern is a regular expression of the `regex` module (the syntax of `re`). Its cost is
# bounded three ways: the pattern's length, the characters of a line searched (a longer line is
# searched and shown up to this length), and time (regex's own timeout, checked inside the match).
GREP_PATTERN_MAX_CHARS = 500
GREP_LINE_MAX_CHARS = 2000
GREP_LINE_TIME_LIMIT_SECONDS = 1.0  # one line taking this long means catastrophic backtracking
GREP_TIME_LIMIT_SECONDS = 10.0  # a whole grep stops here and returns what it found
GREP_MAX_CONTEXT = 20
GREP_DEFAULT_MAX_MATCHES = 50
GREP_MAX_MATCHES = 500


def grep_pattern_compile(pattern: Any) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise ObservationReadError("mode grep needs pattern, a regular expression.")
    if len(pattern) > GREP_PATTERN_MAX_CHARS:
        raise ObservationReadError(f"pattern is limited to {GREP_PATTERN_MAX_CHARS} characters.")
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ObservationReadError(f"pattern is not a valid regular expression: {exc}.") from None


@dataclass
class _GrepOutput:
    lines: list[str]
    separate_groups: bool  # as grep: `--` between groups only when context lines are shown
    chars: int = 0
    last_shown: int = 0

    def add(self, number: int, text: str, cut: bool, marker: str) -> bool:
        """Append a line (grep -n -C style); False when the output limit is reached."""
        line = f"{number}{marker}{text}{'…' if cut else ''}"
        separator = self.separate_groups and self.last_shown and number > self.last_shown + 1
        cost = len(line) + 1 + (3 if separator else 0)
        if self.chars + cost > READ_MAX_CHARS:
            return False
        if separator:
            self.lines.append("--")
        self.lines.append(line)
        self.chars += cost
        self.last_shown = number
        return True


def observation_grep(
    *, observation: Observation, pattern: Any, context: Any = None, max_matches: Any = None
) -> dict[str, Any]:
    """The lines matching `pattern`, numbered (`N:line`), with `context` lines (`N-line`) around
    each and `--` between separate groups, as grep -n -C prints them."""
    text_only(observation, "grep")
    compiled = grep_pattern_compile(pattern)
    context = int_arg(context, "context", 0)
    max_matches = int_arg(max_matches, "max_matches", GREP_DEFAULT_MAX_MATCHES)
    if not 0 <= context <= GREP_MAX_CONTEXT:
        raise ObservationReadError(f"context must be from 0 to {GREP_MAX_CONTEXT}.")
    if not 1 <= max_matches <= GREP_MAX_MATCHES:
        raise ObservationReadError(f"max_matches must be from 1 to {GREP_MAX_MATCHES}.")
    output = _GrepOutput([], separate_groups=context > 0)
    before: deque[tuple[int, str, bool]] = deque(maxlen=context)
    matches, after, stopped = 0, 0, None
    deadline = time.monotonic() + GREP_TIME_LIMIT_SECONDS
    lines = iter_lines(chunks_from(observation, 0), first_line=1, keep=GREP_LINE_MAX_CHARS)
    for number, text, cut in lines:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped = f"time limit of {GREP_TIME_LIMIT_SECONDS:g} s reached at line {number}"
            break
        if matches >= max_matches and not after:
            stopped = (
                f"max_matches ({max_matches}) reached before line {number}: raise max_matches, narrow "
                f"the pattern, or read on with lines from line {number}"
            )
            break
        timeout = min(GREP_LINE_TIME_LIMIT_SECONDS, remaining)
        try:
            found = compiled.search(text, timeout=timeout) is not None and matches < max_matches
        except TimeoutError:
            if timeout < GREP_LINE_TIME_LIMIT_SECONDS:
                stopped = f"time limit of {GREP_TIME_LIMIT_SECONDS:g} s reached at line {number}"
                break
            raise ObservationReadError(
                f"The pattern took over {GREP_LINE_TIME_LIMIT_SECONDS:g} s on line {number} (catastrophic "
                "backtracking): simplify it, e.g. avoid nested quantifiers such as (a+)+."
            ) from None
        if found:
            matches += 1
            ok = all(output.add(n, t, c, "-") for n, t, c in before) and output.add(number, text, cut, ":")
            before.clear()
            after = context
        elif after:
            ok = output.add(number, text, cut, "-")
            after -= 1
        else:
            before.append((number, text, cut))
            continue
        if not ok:
            stopped = f"output limit of {READ_MAX_CHARS} characters reached at line {number}"
            break
    result: dict[str, Any] = {
        "scratchpad_id": observation.id,
        "mode": "grep",
        "pattern": pattern,
        "matches": matches,
        "content": "\n".join(output.lines),
    }
    if stopped:
        result["stopped"] = stopped
    return result
