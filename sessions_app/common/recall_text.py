"""What the long-term search index (`recall`, DESIGN.md "Agents") keeps of a message, and how a
plain query is cut into words: the rules the services that index, the migration that builds the
index, and the selector that searches all share.

Plain functions, no database.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from sessions_app.common.content import content_text

# DESIGN.md: "very long texts are indexed by their first 100,000 characters".
RECALL_TEXT_MAX_CHARS = 100_000

# The kinds of search documents: a message of a history, a compaction's summary, an offloaded
# tool result's content.
KIND_MESSAGE = "message"
KIND_SUMMARY = "summary"
KIND_OBSERVATION = "observation"

# A document's `role`: a message's own (`user`, `assistant`), `tool` for a user message that
# only answers tool calls and for an observation, `summary` for a summary.
ROLE_TOOL = "tool"
ROLE_SUMMARY = "summary"

# Messages whose text is indexed elsewhere or is the engine's own: a compaction's summary message
# (the archive's summary is its document), a message carried verbatim into the next epoch (its
# original's document moves to it), the pre-compaction warning (the engine's seed text).
NOT_INDEXED_MESSAGE_TYPES = frozenset({"compact", "turn_summary", "carried", "compaction_warning"})


def text_for_index(text: str) -> str:
    """`text` as the index keeps it: its first RECALL_TEXT_MAX_CHARS characters."""
    return text[:RECALL_TEXT_MAX_CHARS]


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        # The call as the model wrote it: the tool's name, then its input as compact JSON.
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
        return f"{block.get('name', '')} {arguments}"
    if kind == "tool_result":
        return content_text(block.get("content"), sep="\n")
    return ""


def message_search_text(content: Any) -> str:
    """The plain text of a message's content as the model saw it: its text blocks, its tool calls
    (the tool's name and its input as compact JSON) and its tool results' text, one per line;
    at most RECALL_TEXT_MAX_CHARS characters."""
    if isinstance(content, str):
        return text_for_index(content)
    if not isinstance(content, list):
        return ""
    parts = [text for text in (_block_text(block) for block in content) if text]
    return text_for_index("\n".join(parts))


def message_search_role(role: str, content: Any) -> str:
    """A message's role as a search hit shows it: `tool` for a user message of tool results only."""
    if (
        role == "user"
        and isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    ):
        return ROLE_TOOL
    return role


def message_indexed(metadata: Any) -> bool:
    """Whether a message with `metadata` gets a document of its own (NOT_INDEXED_MESSAGE_TYPES)."""
    return not (isinstance(metadata, dict) and metadata.get("type") in NOT_INDEXED_MESSAGE_TYPES)


# A query's words: runs of letters and digits. Everything else (quotes, operators, `*`, `:`,
# `-`, parentheses) separates words and is never passed to the database's query syntax.
_WORD_RE = re.compile(r"[^\W_]+")
# The most distinct words of a query that are searched (the first ones): a query of a thousand
# words would otherwise be a thousand-term OR for the database.
RECALL_QUERY_MAX_WORDS = 32
# The longest word searched; longer runs are cut (no real word is longer, and PostgreSQL
# ignores words over 2,047 bytes).
RECALL_WORD_MAX_CHARS = 64


def query_words(query: str) -> list[str]:
    """The distinct words of a plain query (case-folded), in order, at most RECALL_QUERY_MAX_WORDS."""
    words: list[str] = []
    for match in _WORD_RE.finditer(query):
        word = match.group(0).casefold()[:RECALL_WORD_MAX_CHARS]
        if word not in words:
            words.append(word)
            if len(words) >= RECALL_QUERY_MAX_WORDS:
                break
    return words


def fts5_query(words: list[str]) -> str:
    """SQLite FTS5's query matching any of `words`: each a quoted string (its double quotes
    doubled), OR'd."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


def tsquery_text(words: list[str]) -> str:
    """PostgreSQL's `to_tsquery` text matching any of `words`: each a quoted lexeme (its single
    quotes and backslashes escaped), OR'd."""
    quoted = ("'" + word.replace("\\", "\\\\").replace("'", "''") + "'" for word in words)
    return " | ".join(quoted)


# The longest passage a hit shows (DESIGN.md: "at most 1,000 characters").
PASSAGE_MAX_CHARS = 1_000
ELLIPSIS = "…"
# The shortest start of a query word looked for when the word itself is not in the text (the
# databases match stems: "compacting" finds "compaction").
_STEM_MIN_CHARS = 4


# Occurrences of each query word looked at when placing a passage (a bound on the work).
_OCCURRENCES_MAX = 200


def _occurrences(folded: str, word: str) -> list[int]:
    """Where `word` starts in `folded` as a word's start (not inside another word), at most
    `_OCCURRENCES_MAX` places."""
    pattern = re.compile(r"(?<![^\W_])" + re.escape(word))
    return [m.start() for _, m in zip(range(_OCCURRENCES_MAX), pattern.finditer(folded), strict=False)]


def _best_match(text: str, words: list[str], room: int) -> tuple[int, int]:
    """Where the passage should centre: the start and length of the first occurrence of the
    window of `room` characters that holds the most different query words (the first such
    window); the words' stems when none of the words is found; (0, 0) when nothing is."""
    folded = text.casefold()
    found = [(at, index, len(w)) for index, w in enumerate(words) for at in _occurrences(folded, w)]
    if not found:
        stems = [w[: max(_STEM_MIN_CHARS, len(w) - 3)] for w in words if len(w) > _STEM_MIN_CHARS]
        found = [(at, index, len(w)) for index, w in enumerate(stems) for at in _occurrences(folded, w)]
    if not found:
        return 0, 0
    found.sort()
    best, best_count, counts, low = 0, 0, Counter[int](), 0
    for at, index, _ in found:
        counts[index] += 1
        while at - found[low][0] > room // 2:
            counts[found[low][1]] -= 1
            if not counts[found[low][1]]:
                del counts[found[low][1]]
            low += 1
        if len(counts) > best_count:
            best, best_count = low, len(counts)
    return found[best][0], found[best][2]


def passage(text: str, words: list[str], *, max_chars: int = PASSAGE_MAX_CHARS) -> str:
    """At most `max_chars` characters of `text` around where `words` are found in it
    (case-insensitively, at a word's start; where most of them are found close together, else
    the first), a cut at either end marked with "…"."""
    if len(text) <= max_chars:
        return text
    room = max_chars - 2 * len(ELLIPSIS)
    at, size = _best_match(text, words, room)
    start = max(0, min(at - (room - size) // 3, len(text) - room))
    end = min(len(text), start + room)
    head = ELLIPSIS if start > 0 else ""
    tail = ELLIPSIS if end < len(text) else ""
    return head + text[start:end] + tail
