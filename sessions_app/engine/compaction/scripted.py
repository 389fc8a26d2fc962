"""The scripted model's rules for compaction (part of the engine's core feature): it summarizes,
and it answers the pre-compaction warning.

Its summary is deterministic: the user's requests in order and the assistant's last reply, read
back from the transcript the summary call sends (`[user] …` / `[assistant] …` lines). Combining
partial summaries joins them in order.
"""

from __future__ import annotations

import re

from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.engine.compaction.summary import is_shared_summary_text
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule
from sessions_app.engine.prompts import (
    COMPACTION_COMBINE_INSTRUCTION,
    COMPACTION_PREVIOUS_SUMMARY_HEADING,
    COMPACTION_SUMMARY_MESSAGE,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
    PRE_COMPACTION_WARNING,
)

PREVIEW_CHARS = 200


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


_REQUESTS = "User requests: "
_LAST_REPLY = " Last assistant reply: "
_LIMIT_RE = re.compile(r"Keep the summary under (\d+) words\.")


def _parse(summary: str) -> tuple[list[str], str]:
    """The requests and last reply of one of this rule's own summaries."""
    head, _, last = summary.partition(_LAST_REPLY)
    head = head.strip()
    if not head.startswith(_REQUESTS):
        return ([_short(summary)] if summary.strip() else []), ""
    body = head[len(_REQUESTS) :].rstrip(".")
    requests = [r for r in body.split("; ") if r and r != "none"]
    return requests, last.strip()


def _render(requests: list[str], last_reply: str, words: int | None, max_tokens: int | None = None) -> str:
    def text(items: list[str], dropped: int) -> str:
        listed = "; ".join(items) if items else "none"
        out = _REQUESTS + (f"({dropped} earlier requests left out) " if dropped else "") + listed + "."
        return out + (_LAST_REPLY + last_reply if last_reply else "")

    dropped = 0

    def too_long(rendered: str) -> bool:
        # Its word limit, and the call's `max_tokens` as a real model's answer is cut at it.
        return (words is not None and len(rendered.split()) > words) or (
            max_tokens is not None and estimate_text_tokens(rendered) > max_tokens
        )

    # Bounded: the oldest requests go first when the summary would pass its limits.
    while len(requests) > 1 and too_long(text(requests, dropped)):
        requests, dropped = requests[1:], dropped + 1
    return text(requests, dropped)


_SUMMARY_HEAD = COMPACTION_SUMMARY_MESSAGE.split("{summary}")[0]


def _text_blocks(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _summarize_shared(inp: ScriptedInput, words: int | None, max_tokens: int | None) -> ScriptedReply:
    """The summary call in the session's layout: the history is the request's own messages
    (the last one, the instruction with this call's memory blocks, is not read)."""
    requests: list[str] = []
    last_reply = ""
    messages = inp.body.get("messages", [])
    for index, message in enumerate(messages[:-1]):
        for text in _text_blocks(message.get("content")):
            if message.get("role") == "assistant":
                last_reply = _short(text) if text.strip() else last_reply
            elif index == 0 and text.startswith(_SUMMARY_HEAD):
                # Merge, never nest: the earlier summary's requests come first, in one list.
                found, reply = _parse(text[len(_SUMMARY_HEAD) :])
                requests += found
                last_reply = reply or last_reply
            elif not text.startswith(PRE_COMPACTION_WARNING[:20]):
                requests.append(_short(text))
    return ScriptedReply(text=_render(requests, last_reply, words, max_tokens))


@scripted_rule()
def summarize(inp: ScriptedInput) -> ScriptedReply | None:
    if inp.user_text is not None and is_shared_summary_text(inp.user_text):
        limit = _LIMIT_RE.search(inp.user_text)
        return _summarize_shared(inp, int(limit.group(1)) if limit else None, inp.body.get("max_tokens"))
    if inp.system_text != COMPACTION_SUMMARY_SYSTEM_PROMPT or inp.user_text is None:
        return None
    limit = _LIMIT_RE.search(inp.user_text)
    words = int(limit.group(1)) if limit else None
    max_tokens = inp.body.get("max_tokens")
    requests: list[str] = []
    last_reply = ""
    if COMPACTION_COMBINE_INSTRUCTION in inp.user_text:
        for part in inp.user_text.split("\n\n"):
            if part.startswith("Summary of part "):
                found, reply = _parse(part.split("\n", 1)[1])
                requests += found
                last_reply = reply or last_reply
        return ScriptedReply(text=_render(requests, last_reply, words, max_tokens))
    text = inp.user_text
    if text.startswith(COMPACTION_PREVIOUS_SUMMARY_HEADING):
        # Merge, never nest: the earlier summary's requests come first, in one list.
        previous, _, text = text[len(COMPACTION_PREVIOUS_SUMMARY_HEADING) :].partition("\n\nConversation")
        requests, last_reply = _parse(previous.strip())
    for line in text.splitlines():
        if line.startswith("[user] ") and not line[7:].startswith(PRE_COMPACTION_WARNING[:20]):
            requests.append(_short(line[7:]))
        elif line.startswith("[assistant] "):
            last_reply = _short(line[12:])
    return ScriptedReply(text=_render(requests, last_reply, words, max_tokens))


@scripted_rule()
def answer_the_compaction_warning(inp: ScriptedInput) -> ScriptedReply | None:
    # Seed 000: "In many cases, the agent will respond with 'Notepad is up to date'".
    if inp.user_text is not None and inp.user_text == PRE_COMPACTION_WARNING:
        return ScriptedReply(text="Notepad is up to date.")
    return None
