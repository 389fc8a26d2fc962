"""What fits a session's context window: the compaction threshold, the headroom kept for the
estimate's error, the largest prompt a call may have and the answer it leaves room for, the
calibrated estimate of the next request, and a user message's estimate.

The estimate, before every model call: `last_prompt_tokens + ratio * (estimate of this request −
estimate of the previous request)` against `context_window × compact_threshold`. The provider's
count of the previous prompt carries the precision; only the difference is estimated locally, from
the per-message estimates stored with each message (the history is never re-encoded), scaled by
the session's observed provider/local ratio. With no previous count (a new session, a new epoch),
the whole request is estimated.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sessions_app.common.estimate import FALLBACK_CHARS_PER_TOKEN, estimate_json_tokens, estimate_text_tokens
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING

# Room kept between a request's estimate plus its max_tokens and the window: a share of the window,
# plus a share of the estimate for its error (larger before the provider has counted a prompt of
# this session: the local tokenizer is not the model's).
WINDOW_HEADROOM_SHARE = 0.03
ESTIMATE_ERROR_SHARE = 0.15
# Before any prompt of the session was counted (its provider/local ratio is unknown); and after a
# compaction, when the ratio is known but the new epoch's prompt not counted yet.
ESTIMATE_ERROR_SHARE_UNCALIBRATED = 0.25
ESTIMATE_ERROR_SHARE_RATIO_KNOWN = 0.1
# The least output a turn's call is allowed (its max_tokens is lowered to fit the window).
MIN_OUTPUT_TOKENS = 256


class ContextWindowTooSmall(Exception):
    """What cannot be masked or summarized does not fit the window: the turn cannot go on.
    `code` is `compaction_failed` when a failed summary is why."""

    def __init__(self, message: str, *, code: str = "context_window_too_small") -> None:
        super().__init__(message)
        self.code = code


def threshold_tokens(session: SessionSnapshot) -> int:
    return int(session.context_window * session.compact_threshold)


def window_headroom(session: SessionSnapshot, estimate: int = 0) -> int:
    """Room for the estimate's error: once the provider has counted a prompt of this session, only
    what was added since is estimated (`estimate_prompt_tokens`), so only that part may be off."""
    # A ratio was observed (not 1.0): only its drift is uncertain.
    return _headroom(session.context_window, session.last_prompt_tokens, session.token_ratio != 1.0, estimate)


def _headroom(context_window: int, last_prompt_tokens: int | None, ratio_known: bool, estimate: int) -> int:
    if last_prompt_tokens is None:
        uncertain = estimate * (
            ESTIMATE_ERROR_SHARE_RATIO_KNOWN if ratio_known else ESTIMATE_ERROR_SHARE_UNCALIBRATED
        )
    else:
        uncertain = max(0, estimate - last_prompt_tokens) * ESTIMATE_ERROR_SHARE
    return int(context_window * WINDOW_HEADROOM_SHARE + uncertain)


def fit_limit(session: SessionSnapshot) -> int:
    """The largest prompt estimate a call may have and still leave MIN_OUTPUT_TOKENS of answer
    inside the window (0 when none does)."""
    window, counted = session.context_window, session.last_prompt_tokens
    ratio_known = session.token_ratio != 1.0

    def fits(estimate: int) -> bool:
        headroom = _headroom(window, counted, ratio_known, estimate)
        return window - estimate - headroom >= MIN_OUTPUT_TOKENS

    # The room shrinks as the estimate grows (by a token at least for each token), so the
    # boundary is near where the headroom's rule, without its rounding down, leaves
    # MIN_OUTPUT_TOKENS; from there the exact one is a step or two away. Every request's build
    # asks this: a binary search was two dozen rounds.
    room = window - MIN_OUTPUT_TOKENS - window * WINDOW_HEADROOM_SHARE
    if counted is None:
        guess = room / (
            1 + (ESTIMATE_ERROR_SHARE_RATIO_KNOWN if ratio_known else ESTIMATE_ERROR_SHARE_UNCALIBRATED)
        )
    elif room <= counted:
        guess = room
    else:
        guess = (room + counted * ESTIMATE_ERROR_SHARE) / (1 + ESTIMATE_ERROR_SHARE)
    estimate = min(max(int(guess), 0), window)
    while estimate < window and fits(estimate + 1):
        estimate += 1
    while estimate > 0 and not fits(estimate):
        estimate -= 1
    return estimate


def window_needed(session: SessionSnapshot, estimate: int) -> int:
    """The least context window in which a prompt of `estimate` tokens leaves MIN_OUTPUT_TOKENS
    of answer (the same measure as `output_room`)."""
    share = WINDOW_HEADROOM_SHARE
    # The headroom's part that does not grow with the window: the estimate's error.
    error = window_headroom(session, estimate) - int(session.context_window * share)
    window = math.ceil((estimate + MIN_OUTPUT_TOKENS + error) / (1 - share))
    while window - estimate - _headroom(
        window, session.last_prompt_tokens, session.token_ratio != 1.0, estimate
    ) < (MIN_OUTPUT_TOKENS):
        window += 1
    return window


# What the features' notes after the warning may add (an open task's name and the like).
WARNING_NOTES_TOKENS = 120
# A tool result's own JSON around its content in the next request (its block, its id).
RESULT_BLOCK_TOKENS = 30


def warning_reserve(session: SessionSnapshot) -> int:
    """What seed 000's warning step adds to a request (the warning and the features' notes after
    it), in the provider's tokens. The warning is given while a request plus this still fits
    (`fit_limit`), so the warning step and its answer (at least MIN_OUTPUT_TOKENS) always fit."""
    ratio = session.token_ratio or 1.0
    return round(ratio * (estimate_text_tokens(PRE_COMPACTION_WARNING) + WARNING_NOTES_TOKENS))


def warn_limit(session: SessionSnapshot) -> int:
    """The largest estimate a request may have without the tiers (the warn point): the threshold,
    or less where the window would not hold the warning step on top of the request and of one
    more step of the reserve's size (a threshold near 1). A step that crosses the warn point
    still leaves the warning room: a small one is under the reserve, and a large one's tool
    results are held to `results_room`, which keeps the reserve."""
    return min(threshold_tokens(session), fit_limit(session) - 2 * warning_reserve(session))


def results_room(session: SessionSnapshot, *, next_request: int, calls: int = 1) -> int:
    """How many tokens (of the local estimate, `sessions_app.common.estimate`) one of a step's
    `calls` tool results may take: what the window leaves once the next request holds what it
    holds already (`next_request`, in the provider's tokens: the step just answered and its
    assistant message), the warning step's reserve and room for an answer, shared equally among
    the step's calls. 0 when nothing is left."""
    counted = replace(session, last_prompt_tokens=next_request)
    free = fit_limit(counted) - next_request - warning_reserve(session)
    ratio = session.token_ratio or 1.0
    per_call = int(free / ratio / max(calls, 1)) - RESULT_BLOCK_TOKENS
    return max(0, per_call)


def output_room(session: SessionSnapshot, estimate: int) -> int:
    """The max_tokens a call with this prompt estimate may ask for inside the window."""
    return session.context_window - estimate - window_headroom(session, estimate)


def estimate_prompt_tokens(session: SessionSnapshot, local_estimate: int) -> int:
    """Tokens the next request will count, calibrated by the previous request's exact count."""
    ratio = session.token_ratio or 1.0
    if session.last_prompt_tokens is None or session.last_estimated_tokens is None:
        return round(ratio * local_estimate)
    return max(
        0, session.last_prompt_tokens + round(ratio * (local_estimate - session.last_estimated_tokens))
    )


# A user message longer than this is estimated, not tokenized (seconds of work for megabytes).
HUGE_TEXT_CHARS = 1_000_000
MESSAGE_JSON_OVERHEAD_TOKENS = 10


def message_estimate(content: str) -> int:
    """The stored estimate of a user message: counted with the tokenizer, or for a huge text
    (over HUGE_TEXT_CHARS) a cheap bound, `len / FALLBACK_CHARS_PER_TOKEN` (seed 002's ratio)."""
    if len(content) > HUGE_TEXT_CHARS:
        return math.ceil(len(content) / FALLBACK_CHARS_PER_TOKEN) + MESSAGE_JSON_OVERHEAD_TOKENS
    return estimate_json_tokens([{"type": "text", "text": content}])
