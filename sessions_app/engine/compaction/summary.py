"""Compaction's summary call (seed 002): the history before the running turn, summarized.

The summary is a model call of its own: the session's model, its own system prompt, no tools, the
history rendered as a transcript in one user message (a request holding tool_use blocks would
need the tool definitions). A history too large for one call is summarized in chunks whose
summaries are then combined.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from django.conf import settings

from sessions_app.common.content import content_text, text_clip_middle
from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.engine.compaction.budget import window_headroom
from sessions_app.engine.context import BuiltRequest, StoredMessage
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.prompts import (
    COMPACTION_COMBINE_INSTRUCTION,
    COMPACTION_LENGTH_LIMIT,
    COMPACTION_MERGE_INSTRUCTION,
    COMPACTION_PREVIOUS_SUMMARY_HEADING,
    COMPACTION_SHARED_HEAD,
    COMPACTION_SHARED_MERGE_INSTRUCTION,
    COMPACTION_SUMMARY_INSTRUCTION,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
)
from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError

# How a compaction's summary of the history is asked (`compaction.summary_call`): "shared", in the
# session's own layout after its cached prefix (one user message of instructions at the end; the
# separate call when that does not fit or the answer calls a tool); "separate", seed 002's call
# of its own (its own system prompt, no tools, the history as a transcript). Measured by
# `bench/bench_cost.py` and `bench/bench_continuity.py`.
SUMMARY_CALL_SHARED = "shared"
SUMMARY_CALL_SEPARATE = "separate"

# A summary call is tried this many times (waiting PALIMPSEST_COMPACTION_RETRY_SECONDS, doubling)
# beyond the SDK's own retries, then the compaction has failed.
SUMMARY_ATTEMPTS = 3
SUMMARY_MIN_OUTPUT_TOKENS = 256
SUMMARY_WORDS_PER_TOKEN = 0.75
# A summary never takes more than this share of the window, whatever `summary_max_tokens` says:
# a small window keeps room for the system prompt, the memory and the running turn after it.
SUMMARY_WINDOW_SHARE = 0.2
# ... and at most what the next epoch's request leaves for it, but never less than this.
SUMMARY_FLOOR_TOKENS = 100
# The summary request's own text around the transcript (system prompt, instruction), in tokens.
SUMMARY_REQUEST_OVERHEAD_TOKENS = 300
# Share of the context window one summary call may fill with transcript (room is kept for the
# summary itself); never less than half the window, so small windows still summarize.
SUMMARY_INPUT_SHARE = 0.9
# A summary call refused as too long is made again in smaller parts (the budget times this), at
# most this many times in all.
SUMMARY_SHRINKS = 3
SUMMARY_SHRINK_FACTOR = 0.7
# Longest rendering of one message in the transcript (tool results are the usual giants).
TRANSCRIPT_ITEM_MAX_CHARS = 4000
# record(body, response, purpose, duration_ms): store the summary call like any model call.
RecordCall = Callable[[dict, ModelResponse, str, int], Awaitable[None]]
# record(built, response, duration_ms): store a summary call in the session's layout (its record
# names the stored messages it sent by position, as a turn's call does).
RecordBuilt = Callable[[BuiltRequest, ModelResponse, int], Awaitable[None]]


def _clip(text: str) -> str:
    half = TRANSCRIPT_ITEM_MAX_CHARS // 2
    return text_clip_middle(text, head=half, tail=half)


def transcript_lines(
    messages: Sequence[StoredMessage], *, tool_names: dict[str, str] | None = None
) -> list[str]:
    """One line (or paragraph) per content block: `[user] …`, `[assistant] …`, tool calls and results.

    `tool_names` (tool_use id → name) carries the names of calls across separate renderings.
    """
    names: dict[str, str] = {} if tool_names is None else tool_names
    lines: list[str] = []
    for message in messages:
        for block in message.content:
            kind = block.get("type")
            if kind == "text":
                lines.append(f"[{message.role}] {_clip(block.get('text', ''))}")
            elif kind == "tool_use":
                names[block.get("id", "")] = block.get("name", "tool")
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                lines.append(f"[assistant → tool {block.get('name')}] {_clip(arguments)}")
            elif kind == "tool_result":
                name = names.get(block.get("tool_use_id", ""), "tool")
                status = "tool error" if block.get("is_error") else "tool result"
                result = content_text(block.get("content"), sep="\n", mark_other_blocks=True)
                lines.append(f"[{status} {name}] {_clip(result)}")
    return lines


def _chunks(lines: list[str], budget_tokens: int, ratio: float) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    used = 0
    for line in lines:
        cost = round(ratio * estimate_text_tokens(line)) + 1
        if chunks[-1] and used + cost > budget_tokens:
            chunks.append([])
            used = 0
        chunks[-1].append(line)
        used += cost
    return chunks


def summary_limit(session: SessionSnapshot, room: int | None = None) -> int:
    """The summary's bound in tokens: `summary_max_tokens`, at most a fifth of the window, and at
    most `room`, what the next epoch's request leaves for it (never under SUMMARY_FLOOR_TOKENS)."""
    setting = int(session.setting("compaction", "summary_max_tokens"))
    limit = min(setting, max(SUMMARY_MIN_OUTPUT_TOKENS, int(session.context_window * SUMMARY_WINDOW_SHARE)))
    if room is not None:
        limit = min(limit, max(SUMMARY_FLOOR_TOKENS, room))
    return limit


def summary_request(
    session: SessionSnapshot, text: str, instruction: str, *, max_tokens: int, limit: int
) -> dict[str, Any]:
    words = max(50, int(limit * SUMMARY_WORDS_PER_TOKEN))
    length_limit = COMPACTION_LENGTH_LIMIT.format(words=words)
    return {
        "model": session.model,
        "max_tokens": max_tokens,
        "system": COMPACTION_SUMMARY_SYSTEM_PROMPT,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"{text}\n\n{instruction} {length_limit}"}]}
        ],
    }


def shared_instruction(limit: int, *, merge: bool) -> str:
    """The user message that ends a summary call in the session's layout: what is asked (seed
    002's summary prompt, merging when the epoch starts with a summary) and the summary's bound."""
    words = max(50, int(limit * SUMMARY_WORDS_PER_TOKEN))
    instruction = COMPACTION_SHARED_MERGE_INSTRUCTION if merge else COMPACTION_SUMMARY_INSTRUCTION
    return (
        f"{COMPACTION_SHARED_HEAD}\n\n{COMPACTION_SUMMARY_SYSTEM_PROMPT}\n\n"
        f"{instruction} {COMPACTION_LENGTH_LIMIT.format(words=words)}"
    )


def is_shared_summary_text(text: str) -> bool:
    """Whether a user text is the instruction of a summary call in the session's layout."""
    return text.startswith(COMPACTION_SHARED_HEAD)


async def summarize_shared(*, provider: Provider, built: BuiltRequest, record: RecordBuilt) -> str | None:
    """The summary answered to `built` (a request in the session's layout: its tools, system
    prompt and history as cached, then `shared_instruction`), or None when it must be asked of the
    separate call instead: the provider found the prompt too long, or the answer called a tool
    (none is run) or held no text. API errors are retried with backoff, as the separate call's
    (`CompactionFailed` when they persist)."""

    async def judged(response: ModelResponse, duration_ms: int) -> tuple[str | None, str]:
        await record(built, response, duration_ms)
        if any(block.get("type") == "tool_use" for block in response.content):
            return None, ""
        return _text(response) or None, ""

    try:
        return await _attempts(lambda: provider.complete(built.body, encoded=built.encoded), judged)
    except _TooLong:
        return None


# What a judge of a summary answer returns to have the call made again (`_attempts`).
_AGAIN = object()


async def _attempts(
    ask: Callable[[], Awaitable[ModelResponse]],
    judge: Callable[[ModelResponse, int], Awaitable[tuple[Any, str]]],
) -> Any:
    """A summary call made up to SUMMARY_ATTEMPTS times, waiting PALIMPSEST_COMPACTION_RETRY_SECONDS
    (doubling) between: again after an API error, or when `judge` (given each answer and its
    duration) returns `_AGAIN` with the reason; else what `judge` returns. `_TooLong` when the
    provider found the prompt too long; `CompactionFailed` when every attempt failed."""
    delay = settings.PALIMPSEST_COMPACTION_RETRY_SECONDS
    problem = ""
    for attempt in range(SUMMARY_ATTEMPTS):
        if attempt:
            await asyncio.sleep(delay)
            delay *= 2
        started = time.monotonic()
        try:
            response = await ask()
        except ProviderError as exc:
            if exc.kind == "prompt_too_long":
                raise _TooLong from exc
            problem = f"the summary call failed: {exc}"
            continue
        result, problem = await judge(response, int((time.monotonic() - started) * 1000))
        if result is not _AGAIN:
            return result
    raise CompactionFailed(f"{problem} ({SUMMARY_ATTEMPTS} attempts); the history was not compacted")


def _text(response: ModelResponse) -> str:
    return content_text(response.content).strip()


class CompactionFailed(Exception):
    """The summary call kept failing (after its retries): nothing was compacted."""


def summary_input_estimate(
    session: SessionSnapshot, history: Sequence[StoredMessage], previous_summary: str | None
) -> int:
    """About how many input tokens summarizing `history` (after `previous_summary`) sends, in
    all its calls (the budget's check before them)."""
    local = sum(m.token_estimate for m in history) + estimate_text_tokens(previous_summary or "")
    return round((session.token_ratio or 1.0) * local) + SUMMARY_REQUEST_OVERHEAD_TOKENS


def _max_tokens(session: SessionSnapshot, input_tokens: int, limit: int) -> int:
    """The summary's own bound, lowered so that the call stays inside the window."""
    room = session.context_window - input_tokens - window_headroom(session, input_tokens)
    return max(SUMMARY_MIN_OUTPUT_TOKENS, min(limit, room))


async def summarize(
    *,
    provider: Provider,
    session: SessionSnapshot,
    previous_summary: str | None,
    history: Sequence[StoredMessage],
    record: RecordCall,
    room: int | None = None,
    instructions: tuple[str, str] | None = None,
) -> str:
    """One summary of `previous_summary` (the epoch's, if any) and `history` (the newer messages),
    merged, never nested: by one call or, for a history too large for one, by chunks whose
    summaries are then combined. Each call is retried with backoff (`CompactionFailed` when it
    keeps failing or answers no text). `room`: the tokens the next epoch's request leaves for the
    summary, which bounds it below `summary_limit`. `instructions`: what the call is asked, without
    and with a previous summary (by default, to summarize the conversation)."""
    summary_tokens = summary_limit(session, room)
    budget = max(
        int(session.context_window * SUMMARY_INPUT_SHARE) - summary_tokens, session.context_window // 2
    )
    lines = transcript_lines(history)
    head = f"{COMPACTION_PREVIOUS_SUMMARY_HEADING}\n{previous_summary}\n\n" if previous_summary else ""
    fresh, merge = instructions or (COMPACTION_SUMMARY_INSTRUCTION, COMPACTION_MERGE_INSTRUCTION)
    instruction = merge if previous_summary else fresh
    for _ in range(SUMMARY_SHRINKS):
        try:
            return await _summarize_chunks(
                provider, session, lines, head, instruction, budget, summary_tokens, record
            )
        except _TooLong:
            # The provider counts the transcript higher than the session's token ratio says (its
            # text is not the conversation's): smaller chunks, not the same request again.
            budget = int(budget * SUMMARY_SHRINK_FACTOR)
    raise CompactionFailed(
        "the summary call's prompt was too long for the window even in smaller parts; the history "
        "was not compacted"
    )


class _TooLong(Exception):
    """The provider refused a summary call's prompt as longer than the window."""


async def _summarize_chunks(
    provider: Provider,
    session: SessionSnapshot,
    lines: list[str],
    head: str,
    instruction: str,
    budget: int,
    summary_tokens: int,
    record: RecordCall,
) -> str:
    ratio = session.token_ratio or 1.0
    chunks = _chunks(lines, budget - round(ratio * estimate_text_tokens(head)), ratio)
    summaries = []
    for index, chunk in enumerate(chunks):
        heading = f"Conversation (part {index + 1} of {len(chunks)}):" if len(chunks) > 1 else "Conversation:"
        text = (head if index == 0 else "") + heading + "\n" + "\n".join(chunk)
        body = _request(
            session, text, instruction if index == 0 else COMPACTION_SUMMARY_INSTRUCTION, summary_tokens
        )
        summaries.append(await _call(provider, body, record))
    if len(summaries) == 1:
        return summaries[0]
    parts = "\n\n".join(f"Summary of part {i + 1}:\n{s}" for i, s in enumerate(summaries))
    body = _request(session, parts, COMPACTION_COMBINE_INSTRUCTION, summary_tokens)
    return await _call(provider, body, record)


def _request(session: SessionSnapshot, text: str, instruction: str, limit: int) -> dict[str, Any]:
    # The instruction too: a turn's names its request.
    local = estimate_text_tokens(text) + estimate_text_tokens(instruction)
    tokens = round((session.token_ratio or 1.0) * local) + SUMMARY_REQUEST_OVERHEAD_TOKENS
    return summary_request(
        session, text, instruction, max_tokens=_max_tokens(session, tokens, limit), limit=limit
    )


async def _call(provider: Provider, body: dict[str, Any], record: RecordCall) -> str:
    """The summary text of one call, retried with backoff on an API error or an empty answer."""

    async def judged(response: ModelResponse, duration_ms: int) -> tuple[Any, str]:
        await record(body, response, "summary", duration_ms)
        # Archiving the epoch behind an empty summary would lose the context: keep it as it is.
        text = _text(response)
        return (text, "") if text else (_AGAIN, "the summary call returned no text")

    return str(await _attempts(lambda: provider.complete(body), judged))
