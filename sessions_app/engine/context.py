"""Builds each model request from the session: system prompt, tools, history, memory.

Prompt-caching layout (prefix order is tools → system → messages; at most four breakpoints, the
provider's limit):
- the part stable for the session (tool definitions, the session's system prompt, the sections'
  static guidance) ends with the first cache breakpoint, so that a new epoch reads it from the
  cache; what the sections pinned for the epoch (`ContextSection.pinned_system`) follows it;
- per-call system content (a section's `dynamic_system`, e.g. the notepad in position `system`)
  follows it, and rewrites everything after it when it changes;
- in the history, a breakpoint before the oldest tool result that masking may take next (and,
  in the request right after a masking batch, before the result the batch began at, where the
  earlier requests had theirs): masking changes the prefix only from there on, and the part
  before it is read from the cache;
- the last breakpoint sits on the last stored block *before* any transient blocks, so blocks
  injected into the latest user message for this call only (scratchpad, the current notepad when
  it changed since the epoch began, hints) never enter the cached prefix and the next request
  can read everything up to that point from the cache.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sessions_app.common.caches import LRUCache
from sessions_app.common.canonical import PROMPT_ORDER, canonical_json, sorted_json
from sessions_app.common.estimate import estimate_text_tokens, json_text
from sessions_app.common.types import StoredMessage
from sessions_app.engine.agent_context import AGENT_PIN, agent_texts
from sessions_app.engine.contract import ContextAnchor, ContextSection, SessionSnapshot, ToolSpec
from sessions_app.engine.prepared import PreparedHistory

__all__ = [
    "PROMPT_ORDER",
    "BuiltRequest",
    "PreparedHistory",
    "StoredMessage",
    "build_request",
    "canonical_json",
]

CACHE_CONTROL = {"type": "ephemeral"}


@dataclass
class BuiltRequest:
    body: dict[str, Any]
    # The body with runs of stored messages sent unchanged replaced by {"$messages": [first, last]}.
    record: dict[str, Any]
    estimated_tokens: int
    breakdown: dict[str, int] = field(default_factory=dict)
    # The canonical JSON of `body` (compact, keys sorted: `selectors.request_canonical_bytes`),
    # built from cached parts.
    encoded: bytes = b""
    # Tokens of each context section's per-call parts (dynamic and transient), by name: a finer
    # view of part of `breakdown["dynamic_system"] + breakdown["transient"]`, not added again.
    # A section's stable guidance is counted in `breakdown["system"]` (one joined text).
    sections: dict[str, int] = field(default_factory=dict)
    # The parts `record` names by hash (`{"$part": sha256}`), by hash: their canonical JSON.
    parts: dict[str, str] = field(default_factory=dict)
    # The sections' pinned texts for the session's epoch when this request pinned them (none were
    # stored for the epoch yet): the engine stores them with the call (`context_pins_store`).
    pins_new: dict[str, list[str]] | None = None
    # The epoch's anchored changes (`ContextAnchor.stored()` of each) when this request anchored
    # one: the engine stores them with the call, as `pins_new`.
    anchors_new: list[list[Any]] | None = None
    _sha256: str = field(default="", repr=False, compare=False)

    @property
    def sha256(self) -> str:
        """The SHA-256 of `encoded` (`selectors.request_sha256(body)`), computed once (or given:
        `sha256_known`)."""
        if not self._sha256:
            self._sha256 = hashlib.sha256(self.encoded).hexdigest()
        return self._sha256

    def sha256_known(self, digest: str) -> None:
        """`sha256`, hashed by its caller (from where the previous request's hash left off:
        `prefix.request_mark`)."""
        self._sha256 = digest


def _text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def section_name(section: ContextSection) -> str:
    return str(getattr(section, "name", type(section).__name__))


# Stable texts (the session's system prompt and the guidance, the tools' definitions) whose
# tokens this process keeps.
STABLE_TOKENS_CACHE_TEXTS = 256
_stable_tokens: LRUCache[bytes, int] = LRUCache(STABLE_TOKENS_CACHE_TEXTS)
# Requests are built in the engine's database threads, several at once (one lock for both caches).
_stable_tokens_lock = threading.Lock()


# The sections' per-call texts (a session's notepad, its plan): most are the same as at its last
# call. Kept for several per session, for a thousand sessions running.
TEXT_TOKENS_CACHE_TEXTS = 4096
_text_tokens_cache: LRUCache[bytes, int] = LRUCache(TEXT_TOKENS_CACHE_TEXTS)


def _text_tokens(text: str) -> int:
    """The tokens of a section's text, counted once while the text stays the same (by its
    digest, as `_stable_text_tokens`). Besides the count's own cost, the tokenizer's first use
    in a call on a database thread costs many times its later uses, so a request built from
    unchanged texts does not use it at all."""
    return _cached_tokens(_text_tokens_cache, text)


def _stable_text_tokens(text: str) -> int:
    """The tokens of a session's stable system text, counted once per text: it repeats on every
    call of every session. Kept by a digest of the text, not the text: a system prompt may be
    400,000 characters, and 256 of them would hold hundreds of MB."""
    return _cached_tokens(_stable_tokens, text)


def _cached_tokens(cache: LRUCache[bytes, int], text: str) -> int:
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _stable_tokens_lock:
        tokens = cache.get(key)
    if tokens is None:
        tokens = estimate_text_tokens(text)
        with _stable_tokens_lock:
            cache.set(key, tokens)
    return tokens


def _with_cache_control(block: dict) -> dict:
    marked = dict(block)
    marked["cache_control"] = CACHE_CONTROL
    return marked


@dataclass
class _Prompt:
    """What the model sees of one call, before it is encoded: the request's head (model,
    max_tokens, system blocks, tools) and messages, which stored messages were changed for this
    call (`changed`: the latest user message's injected blocks, the cache breakpoint), and what
    the counts need (the stable system text, the tools' JSON texts, the sections' tokens)."""

    head: dict[str, Any]
    messages: list[dict]
    changed: set[int]
    static_text: str
    # Each tool's JSON as the request carries it and in canonical form.
    tool_texts: list[tuple[str, str]]
    dynamic_tokens: int
    transient_tokens: int
    by_section: dict[str, int]
    pins_new: dict[str, list[str]] | None
    anchors_new: list[list[Any]] | None = None


def build_request(
    *,
    session: SessionSnapshot,
    history: PreparedHistory | Sequence[StoredMessage],
    server_tools: Sequence[ToolSpec],
    max_tokens: int,
    sections: Sequence[ContextSection],
    question: bool = False,
) -> BuiltRequest:
    """The next model request of `session`: what the model sees (`_prompt_assemble`: the
    sections' texts, tools, system blocks, the history with this call's blocks and the cache
    breakpoints), then how it is recorded (`_prompt_encode`: its canonical bytes, the record that
    names stored messages by position, and the token breakdown). `question`: the history's last
    message is a question for this call only (compaction's summary call in the session's layout):
    no transient blocks, and the last breakpoint on the block before it. Runs in a DB thread
    (sections may read the ORM)."""
    prepared = history if isinstance(history, PreparedHistory) else PreparedHistory(history)
    prompt = _prompt_assemble(
        session=session,
        prepared=prepared,
        server_tools=server_tools,
        max_tokens=max_tokens,
        sections=sections,
        question=question,
    )
    return _prompt_encode(prompt, prepared)


def _prompt_assemble(
    *,
    session: SessionSnapshot,
    prepared: PreparedHistory,
    server_tools: Sequence[ToolSpec],
    max_tokens: int,
    sections: Sequence[ContextSection],
    question: bool = False,
) -> _Prompt:
    """The request as the model reads it. Order (and so the cached prefix): tools, then the
    system prompt with the sections' stable guidance (ending with the first cache breakpoint),
    then their per-call system texts, then the history; the sections' transient blocks go
    before the latest user message, after the second breakpoint."""
    # A session of an agent: the agent's instructions come first, its learned text and skills
    # before the features' pinned sections (DESIGN.md, "Agents"), pinned for the epoch too.
    agent = agent_texts(session)
    static_parts = [
        *(agent.lead if agent else []),
        *([session.system_prompt] if session.system_prompt else []),
    ]
    pinned_parts: list[str] = list(agent.sections) if agent else []
    dynamic_parts: list[str] = []
    prefix_parts: list[str] = []
    by_section: dict[str, int] = {}
    dynamic_tokens = transient_tokens = 0
    pins_new: dict[str, list[str]] | None = {AGENT_PIN: agent.pins_new} if agent and agent.pins_new else None
    if agent is not None and agent.sections:
        by_section[AGENT_PIN] = sum(_text_tokens(p) for p in agent.sections)
        dynamic_tokens += by_section[AGENT_PIN]
    anchoring = _Anchoring(session, prepared, question=question)
    for section in sections:
        name = section_name(section)
        pinned = session.pinned(name)
        changed_texts: list[str] = []
        if pinned is None:
            # Nothing pinned for this section in this epoch yet: what it gives now is pinned.
            pinned = tuple(section.pinned_system(session))
            pins_new = pins_new if pins_new is not None else {}
            pins_new[name] = list(pinned)
        else:
            changed_texts = anchoring.section_show(section, name, pinned)
        static, dynamic, prefix = (
            section.static_system(session),
            section.dynamic_system(session),
            () if question else section.message_prefix(session),
        )
        prefix = [*anchoring.transient.pop(name, ()), *prefix]
        static_parts += static
        pinned_parts += [p for p in pinned if p]
        dynamic_parts += dynamic
        prefix_parts += prefix
        # Each part is counted once, here; the breakdown adds these counts up.
        section_dynamic = sum(_text_tokens(p) for p in (*pinned, *dynamic, *changed_texts) if p)
        section_transient = sum(_text_tokens(p) for p in prefix if p)
        dynamic_tokens += section_dynamic
        transient_tokens += section_transient
        by_section[name] = by_section.get(name, 0) + section_dynamic + section_transient
    if pins_new is not None and session.pins is not None:
        # Some sections were pinned before (a section switched on inside the epoch): the stored
        # pins are the epoch's, with these added.
        pins_new = {**{k: list(v) for k, v in session.pins.items()}, **pins_new}

    tools = [spec.definition() for spec in server_tools] + [dict(t) for t in session.client_tools]
    # Each tool's JSON, compact and canonical: the server's tools' encoded once (`ToolSpec`).
    tool_texts = [spec.definition_texts for spec in server_tools] + [
        (json_text(t), sorted_json(t)) for t in tools[len(server_tools) :]
    ]
    static_text = "\n\n".join(p for p in static_parts if p)
    # The breakpoint ends the session's stable text: from epoch to epoch the tools and that text
    # stay byte-identical, so the first request of a new epoch reads them from the cache. What
    # the sections pinned for the epoch follows it in a block of its own, inside the prefix the
    # history's breakpoints cache.
    system: list[dict] = [_with_cache_control(_text_block(static_text))] if static_text else []
    if pinned_parts:
        system.append(_text_block("\n\n".join(pinned_parts)))
        if not static_text:
            system[-1] = _with_cache_control(system[-1])
    if not system and tools:
        tools[-1] = _with_cache_control(tools[-1])
        tool_texts[-1] = (json_text(tools[-1]), sorted_json(tools[-1]))
    system += [_text_block(p) for p in dynamic_parts if p]

    breakpoints = _mask_anchors(session, prepared)
    messages, changed = _messages_for_call(
        prepared,
        [_text_block(p) for p in prefix_parts if p],
        breakpoints,
        question=question,
        inserted=anchoring.inserted,
    )
    # The request asks for the stream itself: its bytes (`encoded`, which the record hashes) are
    # then exactly what the provider sends.
    head: dict[str, Any] = {"model": session.model, "max_tokens": max_tokens, "stream": True}
    if system:
        head["system"] = system
    if tools:
        head["tools"] = tools
    return _Prompt(
        head=head,
        messages=messages,
        changed=changed,
        static_text=static_text,
        tool_texts=tool_texts,
        dynamic_tokens=dynamic_tokens,
        transient_tokens=transient_tokens,
        by_section=by_section,
        pins_new=pins_new,
        anchors_new=anchoring.anchors_new,
    )


# The share of the context window the epoch's anchored changes may take (`_Anchoring`): beyond
# it, a section's change is shown with the latest message for one call only, as it was before
# anchoring (each copy then costs its tokens uncached on every call, but no more room).
ANCHORED_WINDOW_SHARE = 0.1
# And at most this many in an epoch, each at a message of at most this many tokens: a request
# sends each message holding one as changed (encoded again, and recorded whole), so their number
# and size are what an anchored change costs the server on every later call of the epoch.
ANCHORED_MAX_PER_EPOCH = 8
ANCHORED_MESSAGE_MAX_TOKENS = 4096


class _Anchoring:
    """The sections' changes inside the epoch, shown where the cache keeps them.

    A section whose pinned text (`ContextSection.pinned_system`) changed since what the epoch's
    requests showed of it last (its latest anchored change still shown, or else its pin) shows
    the change under its words (`pinned_changed`) with the latest message. The first request
    that shows it anchors it there (`ContextAnchor`, stored with the call): every later request
    of the epoch shows it with that same stored message, so that the prefix up to the latest
    message stays what the previous request sent and is read from the cache, and the last copy
    the model reads is the current one. An anchored change no request shows any more (its
    message left out by the view, e.g. a finished task) is not counted as shown. Once the epoch's
    anchored changes would take more than ANCHORED_WINDOW_SHARE of the window or number
    ANCHORED_MAX_PER_EPOCH, or when the latest message is over ANCHORED_MESSAGE_MAX_TOKENS, a
    change is shown with the latest message for this call only. The summary call in the session's layout
    (`question`) shows the anchored changes before its question and anchors none."""

    def __init__(self, session: SessionSnapshot, prepared: PreparedHistory, *, question: bool) -> None:
        self.session, self.prepared, self.question = session, prepared, question
        self.anchors = list(session.anchors)
        self.anchors_new: list[list[Any]] | None = None
        # Merged message index -> [(block index, text block)], in position order.
        self.inserted: dict[int, list[tuple[int, dict]]] = {}
        # Section name -> its change shown for this call only.
        self.transient: dict[str, list[str]] = {}
        self._latest = self._latest_point()
        self._room = int(ANCHORED_WINDOW_SHARE * session.context_window) - sum(
            _text_tokens("\n\n".join(a.texts)) for a in self.anchors
        )

    def _latest_point(self) -> tuple[int, int, int] | None:
        """(position, merged index, block index) of where this call's blocks go: the latest user
        message's latest stored message, after its tool results."""
        merged = self.prepared.messages
        latest = next((i for i in range(len(merged) - 1, -1, -1) if merged[i]["role"] == "user"), None)
        if latest is None:
            return None
        members = self.prepared.members[latest]
        stored_index = members[-1] if latest == len(merged) - 1 else members[0]
        point = self.prepared.insertion_point(stored_index)
        message = self.prepared.stored[stored_index]
        if point is None or message.position < 0:  # left out, or a message of this call only
            return None
        if message.token_estimate > ANCHORED_MESSAGE_MAX_TOKENS:
            return None  # a large message: the change waits for the next one, for this call only
        return message.position, point[0], point[1]

    def section_show(self, section: ContextSection, name: str, pinned: tuple[str, ...]) -> list[str]:
        """Place section `name`'s anchored changes (and a new one, when it changed since) into
        this call; the texts shown, for the count."""
        shown: list[str] = []
        last = pinned
        for anchor in self.anchors:
            if anchor.section != name:
                continue
            stored_index = self.prepared.stored_index_at(anchor.position)
            point = None if stored_index is None else self.prepared.insertion_point(stored_index)
            text = section.pinned_changed(self.session, anchor.texts) if point is not None else None
            if point is None or text is None:
                continue  # not shown in this call: the latest shown decides whether to show again
            self.inserted.setdefault(point[0], []).append((point[1], _text_block(text)))
            shown.append(text)
            last = anchor.texts
        if self.question:
            return shown
        now = tuple(section.pinned_system(self.session))
        text = section.pinned_changed(self.session, now) if now != last else None
        if text is None:
            return shown
        cost = _text_tokens("\n\n".join(now))
        if self._latest is None or cost > self._room or len(self.anchors) >= ANCHORED_MAX_PER_EPOCH:
            self.transient[name] = [text]
            return shown
        position, index, at = self._latest
        self._room -= cost
        self.anchors.append(ContextAnchor(position, name, now))
        self.anchors_new = [anchor.stored() for anchor in self.anchors]
        self.inserted.setdefault(index, []).append((at, _text_block(text)))
        return [*shown, text]


def anchors_stale_after(session: SessionSnapshot, position: int) -> tuple[list[ContextAnchor], int]:
    """The epoch's anchored changes a masking batch that rewrites the prefix from `position` on
    may drop at no further cost: those at or after it that a later change of their section
    replaces (the last of each section stays, so the last copy the model reads is still the
    current one). With about the tokens they take (local estimate)."""
    last = {anchor.section: anchor for anchor in session.anchors}
    stale = [a for a in session.anchors if a.position >= position and last[a.section] is not a]
    return stale, sum(_text_tokens("\n\n".join(a.texts)) for a in stale)


def _mask_anchors(session: SessionSnapshot, prepared: PreparedHistory) -> list[tuple[int, int]]:
    """Where the history's cache breakpoints before the last go (merged message index, block
    index): before the result the latest masking batch began at (where the requests before the
    batch had theirs), and before the oldest result masking may take next; in the warning step
    before a summary of the history, at the end of that history instead of the latter."""
    keep_recent = int(session.setting("compaction", "mask_keep_recent"))
    anchors: list[tuple[int, int]] = []
    candidates: tuple[str | None, ...] = (prepared.mask_anchor, prepared.first_unmasked_result(keep_recent))
    if prepared.summary_anchor is not None:
        # The warning step before a summary of the history: one breakpoint where the summary
        # call's shared prefix ends (no masking comes before the summary).
        at = prepared.block_before_position(prepared.summary_anchor)
        anchors += [at] if at is not None else []
        candidates = (prepared.mask_anchor,)
    for tool_use_id in candidates:
        at = prepared.block_before_result(tool_use_id) if tool_use_id else None
        if at is not None and at not in anchors:
            anchors.append(at)
    return anchors


def _messages_for_call(
    prepared: PreparedHistory,
    prefix_blocks: list[dict],
    breakpoints: Sequence[tuple[int, int]] = (),
    *,
    question: bool = False,
    inserted: dict[int, list[tuple[int, dict]]] | None = None,
) -> tuple[list[dict], set[int]]:
    """The history's messages for this call: the sections' anchored changes put in (`inserted`:
    by merged message, (block index, block) to go before that block), the transient blocks put
    into the latest user message after them, a cache breakpoint on each of `breakpoints` (given
    before any insertion) before the last one, and the last on the last block before the
    transient blocks. The prepared messages are shared with later steps: only copies are
    changed. Returns the messages and the indexes of those changed."""
    merged = list(prepared.messages)
    inserted = {index: list(blocks) for index, blocks in (inserted or {}).items()}
    latest_user = next((i for i in range(len(merged) - 1, -1, -1) if merged[i]["role"] == "user"), None)
    transient_at: tuple[int, int] | None = None
    target_message, target_block = len(merged) - 1, -1
    if prefix_blocks and latest_user is not None:
        content = merged[latest_user]["content"]
        # Before the latest stored message's own blocks (it may be merged after others), and
        # after its tool results: the API wants tool_result blocks first in a user message.
        split = len(content) - prepared.shown_length[-1] if latest_user == len(merged) - 1 else 0
        while split < len(content) and content[split].get("type") == "tool_result":
            split += 1
        transient_at = (latest_user, split)
        target_message, target_block = (latest_user, split - 1) if split > 0 else (latest_user - 1, -1)
    elif question and merged and prepared.shown_length and prepared.shown_length[-1]:
        # The question is the last message's last blocks: the breakpoint goes before them.
        last = len(merged) - 1
        split = len(merged[last]["content"]) - prepared.shown_length[-1]
        target_message, target_block = (last, split - 1) if split > 0 else (last - 1, -1)

    def shifted(message_index: int, block_index: int) -> int:
        # A block's index once the insertions are in; a breakpoint on a block moves onto the
        # blocks inserted right after it (they end the same prefix).
        return block_index + sum(1 for at, _ in inserted.get(message_index, ()) if at <= block_index + 1)

    changed: set[int] = set()
    tail: tuple[int, int] | None = None
    if (
        transient_at is not None
        and transient_at[1] == 0
        and any(at == 0 for at, _ in inserted.get(transient_at[0], ()))
    ):
        # Inserted blocks open the latest message: the last breakpoint goes on the last of them.
        tail = (transient_at[0], -1)
    elif target_message >= 0 and merged[target_message]["content"]:
        tail = (target_message, target_block % len(merged[target_message]["content"]))
    marks = [*(b for b in breakpoints if b < tail), tail] if tail is not None else []
    moved = [(m, shifted(m, b)) for m, b in marks]
    for index, blocks in inserted.items():
        before: dict[int, list[dict]] = {}
        for at, block in blocks:
            before.setdefault(at, []).append(block)
        original = merged[index]["content"]
        content = [b for i, block in enumerate(original) for b in (*before.get(i, ()), block)]
        content += before.get(len(original), [])
        merged[index] = {"role": merged[index]["role"], "content": content}
        changed.add(index)
    if transient_at is not None:
        index, at = transient_at
        at += sum(1 for where, _ in inserted.get(index, ()) if where <= at)
        content = merged[index]["content"]
        merged[index] = {"role": "user", "content": content[:at] + prefix_blocks + content[at:]}
        changed.add(index)
    elif question and merged:
        changed.add(len(merged) - 1)
    for message_index, block_index in moved:
        marked = merged[message_index]
        content = list(marked["content"])
        content[block_index] = _with_cache_control(copy.copy(content[block_index]))
        merged[message_index] = {"role": marked["role"], "content": content}
        changed.add(message_index)
    return merged, changed


def _prompt_encode(prompt: _Prompt, prepared: PreparedHistory) -> BuiltRequest:
    """The request's canonical bytes (what is hashed and sent), its record and its token
    breakdown. Unchanged stored messages are not encoded again: each keeps its bytes in the
    prepared history, and the record names runs of them by position."""
    head, tool_texts = prompt.head, prompt.tool_texts
    tools = "tools" in head
    # Every message's bytes at C speed (a list copy), then the few changed ones replaced.
    parts = prepared.encoded_all()
    for i in prompt.changed:
        parts[i] = canonical_json(prompt.messages[i])
    # The head is encoded with a unique placeholder where the messages go.
    marker = uuid.uuid4().hex
    known = {"tools": "[" + ",".join(canonical for _, canonical in tool_texts) + "]"} if tools else {}
    before, after = canonical_json({**head, "messages": marker}, encoded=known).split(f'"{marker}"'.encode())
    # The record: runs of stored messages by position, the tools by their part's hash (stored
    # once, `RequestPart`), the rest as sent.
    request_parts: dict[str, str] = {}
    record_head: dict[str, Any] = head
    if tools:
        digest = hashlib.sha256(known["tools"].encode()).hexdigest()
        request_parts[digest] = known["tools"]
        record_head = {**head, "tools": {"$part": digest}}
    record = {**record_head, "messages": prepared.record(prompt.messages, prompt.changed)}
    # One copy of the megabytes, not one per concatenation.
    if parts:
        parts[0] = before + b"[" + parts[0]
        parts[-1] = parts[-1] + b"]" + after
        encoded = b",".join(parts)
    else:
        encoded = before + b"[]" + after

    breakdown = {
        "system": _stable_text_tokens(prompt.static_text) if prompt.static_text else 0,
        "dynamic_system": prompt.dynamic_tokens,
        # The tools' definitions are the same call after call: counted once per distinct JSON.
        "tools": _stable_text_tokens("[" + ",".join(text for text, _ in tool_texts) + "]") if tools else 0,
        "history": prepared.token_total,
        "transient": prompt.transient_tokens,
    }
    return BuiltRequest(
        body={**head, "messages": prompt.messages},
        record=record,
        estimated_tokens=sum(breakdown.values()),
        breakdown=breakdown,
        encoded=encoded,
        sections=prompt.by_section,
        parts=request_parts,
        pins_new=prompt.pins_new,
        anchors_new=prompt.anchors_new,
    )
