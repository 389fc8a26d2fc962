"""Every text the model reads about `recall`, in one place."""

from __future__ import annotations

from typing import Any

from sessions_app.recall_selectors import RECALL_QUERY_MAX_CHARS

TOOL_NAME = "recall"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
# The longest query the tool takes (plain words; the first ones are searched).
QUERY_MAX_CHARS = RECALL_QUERY_MAX_CHARS

RECALL_DESCRIPTION = (
    "Search everything your earlier sessions said and were told: their conversations, their "
    "compaction summaries and offloaded tool results (in a session without an agent: this "
    "session's own archives, every one of them). The current conversation is not searched: it is "
    "already in view. The query is plain words; results come best match first, each with the "
    "session, when it was said, who said it and the matching passage."
)
RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Plain words to search for."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "description": f"How many results at most. Default {DEFAULT_LIMIT}, at most {MAX_LIMIT}.",
        },
    },
    "required": ["query"],
}

NOT_OFFERED = (
    "recall is not offered here yet: it searches an agent's earlier sessions, or, in a session "
    "without an agent, this session's archives, and there is none yet."
)
# Said in the result when the room left in the context could not hold every hit.
DROPPED_NOTE = (
    "{dropped} more matching results did not fit in the room left in your context: ask again with "
    "a smaller limit or more precise words to see others."
)
SHORTENED_NOTE = "The passage was shortened to fit the room left in your context."
