"""`recall`: a reading tool, offered to a session of an agent from its start and to a session
without one once it has an archive (then the tool list changes only at a new epoch). Its result
fits the room the next request leaves (`ToolContext.room_tokens`): the worst hits are dropped
first, then the last one's passage is shortened, and the result says so."""

from __future__ import annotations

from typing import Any

from memory_app.recall import prompts
from sessions_app.common.db import db
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec
from sessions_app.recall_selectors import RecallQueryEmpty, recall_search

# The least of a passage kept when it is shortened to fit, in characters.
PASSAGE_MIN_CHARS = 80


def recall_offered(session: SessionSnapshot) -> bool:
    return session.agent_id is not None or session.epoch > 0


def _fits(result: dict[str, Any], room_tokens: int) -> bool:
    return estimate_json_tokens(result) <= room_tokens


def results_fit(results: list[dict[str, Any]], room_tokens: int | None) -> dict[str, Any]:
    """`{"results": results}`, cut to `room_tokens`: the last (worst) hits dropped while more than
    one is left, then the one left shortened (at least PASSAGE_MIN_CHARS of it kept); a note
    says what was cut."""
    result: dict[str, Any] = {"results": list(results)}
    if room_tokens is None or _fits(result, room_tokens):
        return result
    kept = list(results)
    while len(kept) > 1 and not _fits({"results": kept, "note": ""}, room_tokens):
        kept.pop()
    notes = []
    if len(kept) < len(results):
        notes.append(prompts.DROPPED_NOTE.format(dropped=len(results) - len(kept)))
    if kept and not _fits({"results": kept, "note": " ".join(notes)}, room_tokens):
        hit = kept[0]
        text = hit["text"]
        keep = len(text)
        while keep > PASSAGE_MIN_CHARS:
            keep = max(PASSAGE_MIN_CHARS, keep * 3 // 4)
            kept[0] = {**hit, "text": text[:keep] + "…"}
            if _fits({"results": kept, "note": " ".join([*notes, prompts.SHORTENED_NOTE])}, room_tokens):
                break
        notes.append(prompts.SHORTENED_NOTE)
    result = {"results": kept}
    if notes:
        result["note"] = " ".join(notes)
    return result


async def recall(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    # The input was checked against RECALL_SCHEMA (query a string, limit 1..MAX_LIMIT).
    limit = tool_input.get("limit") or prompts.DEFAULT_LIMIT
    try:
        hits = await db(recall_search)(query=tool_input["query"], limit=limit, session=ctx.session)
    except RecallQueryEmpty as exc:
        raise ToolError(str(exc)) from exc
    return results_fit([hit.as_result() for hit in hits], ctx.room_tokens)


RECALL = ToolSpec(
    name=prompts.TOOL_NAME,
    description=prompts.RECALL_DESCRIPTION,
    input_schema=prompts.RECALL_SCHEMA,
    handler=recall,
    enabled=recall_offered,
    refusal=lambda session: prompts.NOT_OFFERED,
    text_limits={"query": TextLimit(chars=prompts.QUERY_MAX_CHARS, name="QUERY_MAX_CHARS")},
    fits_room=True,  # its result is fitted to the room (`results_fit`): never offloaded
)
