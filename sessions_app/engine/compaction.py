"""Compaction (seed 002): when to compact, and the independent summary call.

When: before every model call, `last_prompt_tokens + ratio * (estimate of this request − estimate
of the previous request)` against `context_window × compact_threshold`. The provider's count of
the previous prompt carries the precision; only the difference is estimated locally, from the
per-message estimates stored with each message (the history is never re-encoded), scaled by the
session's observed provider/local ratio. With no previous count (a new session, a new epoch), the
whole request is estimated.

The summary is a model call of its own: the session's model, its own system prompt, no tools, the
history rendered as a transcript in one user message (a request holding tool_use blocks would
need the tool definitions). A history too large for one call is summarized in chunks whose
summaries are then combined.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sessions_app.engine.context import BuiltRequest, StoredMessage
from sessions_app.engine.prompts import (
    COMPACTION_COMBINE_INSTRUCTION,
    COMPACTION_SUMMARY_INSTRUCTION,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
)
from sessions_app.engine.providers.base import ModelResponse, Provider, ProviderError
from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.engine.tokens import estimate_text_tokens

SUMMARY_MAX_TOKENS = 4096
# Share of the context window one summary call may fill with transcript (room is kept for the
# summary itself); never less than half the window, so small windows still summarize.
SUMMARY_INPUT_SHARE = 0.9
# Longest rendering of one message in the transcript (tool results are the usual giants).
TRANSCRIPT_ITEM_MAX_CHARS = 4000
# Compacting a history of only the summary and a message or two cannot make room.
MIN_MESSAGES_TO_COMPACT = 4

# record(body, response, purpose, duration_ms): store the summary call like any model call.
RecordCall = Callable[[dict, ModelResponse, str, int], Awaitable[None]]


def threshold_tokens(session: SessionSnapshot) -> int:
    return int(session.context_window * session.compact_threshold)


def should_compact(session: SessionSnapshot, built: BuiltRequest, estimate: int, *, messages: int) -> bool:
    """Over the threshold, and compacting can help: there is a history to summarize, and it is
    larger than the excess (when the system prompt, tools and memory alone fill the window, a
    summary cannot make room, and compacting again and again would only lose the history)."""
    excess = estimate - threshold_tokens(session)
    history = round((session.token_ratio or 1.0) * built.breakdown.get("history", 0))
    return excess > 0 and messages >= MIN_MESSAGES_TO_COMPACT and history > excess


def estimate_prompt_tokens(session: SessionSnapshot, local_estimate: int) -> int:
    """Tokens the next request will count, calibrated by the previous request's exact count."""
    ratio = session.token_ratio or 1.0
    if session.last_prompt_tokens is None or session.last_estimated_tokens is None:
        return round(ratio * local_estimate)
    return max(
        0, session.last_prompt_tokens + round(ratio * (local_estimate - session.last_estimated_tokens))
    )


def _clip(text: str) -> str:
    if len(text) <= TRANSCRIPT_ITEM_MAX_CHARS:
        return text
    half = TRANSCRIPT_ITEM_MAX_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") if b.get("type") == "text" else f"[{b.get('type')} block]"
            for b in content
            if isinstance(b, dict)
        )
    return json.dumps(content, ensure_ascii=False)


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
                lines.append(f"[{status} {name}] {_clip(_result_text(block.get('content')))}")
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


def summary_request(session: SessionSnapshot, text: str, instruction: str) -> dict[str, Any]:
    return {
        "model": session.model,
        "max_tokens": SUMMARY_MAX_TOKENS,
        "system": COMPACTION_SUMMARY_SYSTEM_PROMPT,
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"{text}\n\n{instruction}"}]}],
    }


def _text(response: ModelResponse) -> str:
    return "".join(b.get("text", "") for b in response.content if b.get("type") == "text").strip()


async def summarize(
    *, provider: Provider, session: SessionSnapshot, history: Sequence[StoredMessage], record: RecordCall
) -> str:
    """The summary of `history`, by one call or, for a history too large for one, by chunks."""
    budget = max(
        int(session.context_window * SUMMARY_INPUT_SHARE) - SUMMARY_MAX_TOKENS, session.context_window // 2
    )
    chunks = _chunks(transcript_lines(history), budget, session.token_ratio or 1.0)
    summaries = []
    for index, chunk in enumerate(chunks):
        heading = f"Conversation (part {index + 1} of {len(chunks)}):" if len(chunks) > 1 else "Conversation:"
        body = summary_request(session, heading + "\n" + "\n".join(chunk), COMPACTION_SUMMARY_INSTRUCTION)
        summaries.append(_text(await _call(provider, body, record)))
    if len(summaries) == 1:
        summary = summaries[0]
    else:
        parts = "\n\n".join(f"Summary of part {i + 1}:\n{s}" for i, s in enumerate(summaries))
        combine = summary_request(session, parts, COMPACTION_COMBINE_INSTRUCTION)
        summary = _text(await _call(provider, combine, record))
    if not summary:
        # Archiving the epoch behind an empty summary would lose the context: keep it as it is.
        raise ProviderError("the summary call returned no text; the history was not compacted")
    return summary


async def _call(provider: Provider, body: dict[str, Any], record: RecordCall) -> ModelResponse:
    started = time.monotonic()
    response = await provider.complete(body)
    await record(body, response, "summary", int((time.monotonic() - started) * 1000))
    return response
