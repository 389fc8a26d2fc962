"""`session_archive_read` (seed 002): read the most recent archive when the summary lacks detail.

Only the most recent archive is readable, as the seed rules: older context should live in the
summary, the notepad or the scratchpad.
"""

from __future__ import annotations

import uuid
from typing import Any

from sessions_app import selectors
from sessions_app.common.content import text_clip_middle
from sessions_app.common.db import db
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.compaction.summary import transcript_lines
from sessions_app.engine.context import StoredMessage
from sessions_app.engine.contract import TextLimit, ToolContext, ToolError, ToolSpec
from sessions_app.message_content import resolved

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_QUERY_CHARS = 500

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "Index of the first archived message to return (after filtering). Default 0.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "description": f"How many messages to return. Default {DEFAULT_LIMIT}, at most {MAX_LIMIT}.",
        },
        "query": {
            "type": "string",
            "description": "Only messages containing this text (case-insensitive).",
        },
    },
    "required": [],
}
DESCRIPTION = (
    "Read the messages of the most recent archive: the conversation that the last compaction "
    "summarized. Use it when the summary lacks a detail you need. Paginated with offset/limit; "
    "query filters by text."
)
# A page's own JSON besides its messages (ids, counts), and each message's, in tokens.
PAGE_OVERHEAD_TOKENS = 60
MESSAGE_OVERHEAD_TOKENS = 2
# The least text of a clipped message kept around the omission marker, in characters.
CLIP_MIN_CHARS = 40


def _clipped(message: dict[str, Any], room: int) -> dict[str, Any]:
    """`message` with its text cut in the middle (seed 004's omission marker) so that it takes at
    most `room` tokens (or keeps CLIP_MIN_CHARS of text where even that does not fit)."""
    text = message["text"]

    def clip(keep: int) -> dict[str, Any]:
        return {**message, "text": text_clip_middle(text, head=keep // 2, tail=keep - keep // 2)}

    keep = len(text)
    while keep > CLIP_MIN_CHARS:
        cost = estimate_json_tokens(clip(keep))
        if cost <= room:
            break
        # The share of the text that fits at its current size, a little less: a round or two.
        keep = max(CLIP_MIN_CHARS, min(keep - 1, int(keep * room / cost * 0.95)))
    return clip(keep)


def page_fit(messages: list[dict[str, Any]], room_tokens: int | None) -> list[dict[str, Any]]:
    """As many of `messages` (in order) as `room_tokens` holds; at least one, a single message
    larger than the room clipped in the middle to fit it."""
    if room_tokens is None:
        return messages
    left = room_tokens - PAGE_OVERHEAD_TOKENS
    page: list[dict[str, Any]] = []
    for message in messages:
        cost = estimate_json_tokens(message) + MESSAGE_OVERHEAD_TOKENS
        if cost <= left:
            page.append(message)
            left -= cost
            continue
        if not page:
            page.append(_clipped(message, left - MESSAGE_OVERHEAD_TOKENS))
        break
    return page


def archive_page(
    *, session_id: uuid.UUID, offset: int, limit: int, query: str | None, room_tokens: int | None = None
) -> dict[str, Any]:
    """A page of the latest archive: up to `limit` messages from `offset`, no more than
    `room_tokens` holds (`ToolContext.room_tokens`; a single message too large for it is clipped
    in the middle); `next_offset` says where to read on."""
    archive = selectors.archive_latest(session_id=session_id)
    if archive is None:
        raise ToolError("There is no archive yet: nothing has been compacted in this session.")
    rendered: list[dict[str, Any]] = []
    tool_names: dict[str, str] = {}  # tool_use ids seen so far, to name the results that follow
    for message in selectors.archive_messages(archive=archive):
        stored = StoredMessage(message.position, message.role, resolved(message), 0)
        text = "\n".join(transcript_lines([stored], tool_names=tool_names))
        rendered.append({"position": message.position, "role": message.role, "text": text})
    if query:
        needle = query.casefold()
        rendered = [m for m in rendered if needle in m["text"].casefold()]
    total = len(rendered)
    if offset > 0 and offset >= total:
        last = max(total - 1, 0)
        raise ToolError(
            f"offset {offset} is past the end: {total} matching archived messages (offsets 0 to {last})."
        )
    page = page_fit(rendered[offset : offset + limit], room_tokens)
    end = offset + len(page)
    return {
        "archive_id": str(archive.id),
        "epoch": archive.epoch,
        "total": total,
        "offset": offset,
        "messages": page,
        "next_offset": end if end < total else None,
    }


async def session_archive_read(ctx: ToolContext, tool_input: dict) -> dict[str, Any]:
    # The types and the bounds of offset and limit are checked against SCHEMA before the handler
    # runs (a null counts as not given); the query's length is not in the seed's schema.
    offset = tool_input.get("offset") or 0
    limit = tool_input.get("limit") or DEFAULT_LIMIT
    query = tool_input.get("query")
    if query is not None and len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"query must be a string of at most {MAX_QUERY_CHARS} characters.")
    return await db(archive_page)(
        session_id=ctx.session.id,
        offset=offset,
        limit=limit,
        query=query or None,
        room_tokens=ctx.room_tokens,
    )


SESSION_ARCHIVE_READ = ToolSpec(
    name="session_archive_read",
    description=DESCRIPTION,
    input_schema=SCHEMA,
    handler=session_archive_read,
    # Offered once there is an archive to read.
    enabled=lambda session: session.epoch > 0,
    text_limits={"query": TextLimit(chars=MAX_QUERY_CHARS, name="MAX_QUERY_CHARS")},
)
