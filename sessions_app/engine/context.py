"""Builds each model request from the session: system prompt, tools, history, memory.

Prompt-caching layout (prefix order is tools → system → messages):
- the byte-stable part (tool definitions, the session's system prompt and static guidance) ends
  with a cache breakpoint;
- per-call content (dynamic system sections such as the notepad) follows it;
- a second breakpoint sits on the last stored message *before* any transient blocks, so blocks
  injected into the latest user message for this call only (scratchpad, hints) never enter the
  cached prefix and the next request can read everything up to that point from the cache.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from sessions_app.engine.snapshot import SessionSnapshot
from sessions_app.engine.tokens import estimate_json_tokens, estimate_text_tokens
from sessions_app.engine.tools import ToolSpec

CACHE_CONTROL = {"type": "ephemeral"}


@dataclass(frozen=True)
class StoredMessage:
    position: int
    role: str
    content: list[dict]
    token_estimate: int


# A request's top-level keys in the order the prompt is read (and cached): tools, system, messages.
PROMPT_ORDER = ("tools", "system", "messages")


def _sorted_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of a request or a part of it (what is hashed and compared): compact,
    objects' keys sorted (PostgreSQL's jsonb does not keep key order, so a recorded request is
    checked against this form), but a request's own keys in prompt order, so that comparing two
    requests byte by byte follows what prompt caching compares."""
    if not (isinstance(value, dict) and "messages" in value):
        return _sorted_json(value).encode()
    keys = [k for k in sorted(value) if k not in PROMPT_ORDER] + [k for k in PROMPT_ORDER if k in value]
    return ("{" + ",".join(f"{_sorted_json(k)}:{_sorted_json(value[k])}" for k in keys) + "}").encode()


class PreparedHistory:
    """An epoch's stored messages in request shape, kept up to date as messages are appended.

    Consecutive messages of one role are merged (the API wants alternation); each merged
    message's JSON is encoded once; stored messages that travel unchanged are tracked as runs of
    consecutive positions. So a step's request costs, in Python, only what changed (one or two
    messages) plus C-speed copies, not a pass over the whole history.

    Masks (compaction's cheap tier) replace a tool result's content by a short placeholder in
    every request, by `tool_use_id`; the stored message is untouched. Masking re-encodes only
    the message that holds the result, which then travels whole in recorded requests.
    """

    def __init__(
        self,
        stored: Sequence[StoredMessage] = (),
        *,
        epoch: int = 0,
        masks: Mapping[str, str] | None = None,
    ) -> None:
        self.epoch = epoch
        self.stored: list[StoredMessage] = []
        self.messages: list[dict] = []
        self.single: list[bool] = []  # whether messages[i] is exactly one unaltered stored message
        self.encoded: list[bytes | None] = []
        # Runs of single stored messages with consecutive positions: [start_index, end_index
        # (exclusive), first_position].
        self.runs: list[list[int]] = []
        self.token_total = 0
        # tool_use_id → placeholder shown instead of that result; and the tokens each saved.
        self.masks: dict[str, str] = dict(masks or {})
        self.mask_savings: dict[str, int] = {}
        self.members: list[list[int]] = []  # stored indices merged into messages[i]
        self.owner: list[int] = []  # stored index → index in messages
        self.result_at: dict[str, int] = {}  # tool_use_id → stored index of its tool_result
        self.tool_names: dict[str, str] = {}  # tool_use_id → the tool's name
        for message in stored:
            self.append(message)

    def __len__(self) -> int:
        return len(self.stored)

    @property
    def last_position(self) -> int:
        return self.stored[-1].position if self.stored else -1

    def _masked(self, block: dict) -> dict:
        if block.get("type") != "tool_result" or block.get("tool_use_id") not in self.masks:
            return block
        out = {
            "type": "tool_result",
            "tool_use_id": block["tool_use_id"],
            "content": self.masks[block["tool_use_id"]],
        }
        if block.get("is_error"):
            out["is_error"] = True
        return out

    def _saving(self, block: dict) -> int:
        placeholder = self.masks[block["tool_use_id"]]
        return max(0, estimate_json_tokens(block.get("content", "")) - estimate_text_tokens(placeholder))

    def append(self, message: StoredMessage) -> None:
        stored_index = len(self.stored)
        self.stored.append(message)
        self.token_total += message.token_estimate
        content = list(message.content)
        altered = False
        for block in content:
            if block.get("type") == "tool_use":
                self.tool_names[block.get("id", "")] = block.get("name", "tool")
            elif block.get("type") == "tool_result":
                tool_use_id = block.get("tool_use_id", "")
                self.result_at[tool_use_id] = stored_index
                if tool_use_id in self.masks:
                    saving = self._saving(block)
                    self.mask_savings[tool_use_id] = saving
                    self.token_total -= saving
                    altered = True
        if altered:
            content = [self._masked(b) for b in content]
        if self.messages and self.messages[-1]["role"] == message.role:
            last = len(self.messages) - 1
            self.messages[last] = {"role": message.role, "content": self.messages[last]["content"] + content}
            self.encoded[last] = None
            self.members[last].append(stored_index)
            self.owner.append(last)
            if self.single[last]:
                self._unrun(last)
            return
        index = len(self.messages)
        self.messages.append({"role": message.role, "content": content})
        self.single.append(not altered)
        self.encoded.append(None)
        self.members.append([stored_index])
        self.owner.append(index)
        if altered:
            return
        if (
            self.runs
            and self.runs[-1][1] == index
            and self.runs[-1][2] + index - self.runs[-1][0] == message.position
        ):
            self.runs[-1][1] += 1
        else:
            self.runs.append([index, index + 1, message.position])

    def _unrun(self, index: int) -> None:
        """messages[index] no longer travels as one unaltered stored message: take it out of its run."""
        self.single[index] = False
        for number, (start, end, first) in enumerate(self.runs):
            if start <= index < end:
                pieces = []
                if start < index:
                    pieces.append([start, index, first])
                if index + 1 < end:
                    pieces.append([index + 1, end, first + index + 1 - start])
                self.runs[number : number + 1] = pieces
                return

    def tool_results(self) -> list[tuple[str, int]]:
        """(tool_use_id, position of its stored message) of every tool result, oldest first."""
        return sorted(
            ((i, self.stored[s].position) for i, s in self.result_at.items()), key=lambda item: item[1]
        )

    def result_content(self, tool_use_id: str) -> Any:
        """The stored content of a tool result (what a mask hides)."""
        for block in self.stored[self.result_at[tool_use_id]].content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block.get("content", "")
        raise KeyError(tool_use_id)

    def mask(self, tool_use_id: str, placeholder: str) -> int:
        """Show `placeholder` instead of the result of `tool_use_id` from now on; the tokens saved."""
        stored_index = self.result_at[tool_use_id]
        if tool_use_id in self.masks:
            return 0
        self.masks[tool_use_id] = placeholder
        block = next(
            b
            for b in self.stored[stored_index].content
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id
        )
        saving = self._saving(block)
        self.mask_savings[tool_use_id] = saving
        self.token_total -= saving
        index = self.owner[stored_index]
        content: list[dict] = []
        for member in self.members[index]:
            content += [self._masked(b) for b in self.stored[member].content]
        self.messages[index] = {"role": self.messages[index]["role"], "content": content}
        self.encoded[index] = None
        if self.single[index]:
            self._unrun(index)
        return saving

    def encoded_message(self, index: int) -> bytes:
        value = self.encoded[index]
        if value is None:
            value = self.encoded[index] = canonical_json(self.messages[index])
        return value

    def record(self, sent: list[dict], changed: set[int]) -> list[dict]:
        """`sent` with unchanged stored messages replaced by `{"$messages": [first, last]}` runs."""
        out: list[dict] = []
        index = 0
        for start, end, first in self.runs:
            out.extend(sent[index:start])  # merged or masked messages between runs travel whole
            cursor = start
            for cut in sorted(c for c in changed if start <= c < end):
                if cursor < cut:
                    out.append({"$messages": [first + cursor - start, first + cut - 1 - start]})
                out.append(sent[cut])
                cursor = cut + 1
            if cursor < end:
                out.append({"$messages": [first + cursor - start, first + end - 1 - start]})
            index = end
        out.extend(sent[index:])
        return out


class ContextSection(Protocol):
    """A contributor to the prompt (the notepad, the scratchpad, ...). Called in a DB thread.

    A section may have a `name` ("notepad"): `BuiltRequest.sections` reports its tokens under it
    (the dashboard's context gauge); without one, its class name is used.
    """

    def static_system(self, session: SessionSnapshot) -> list[str]:
        """Text for the stable system prompt (guidance): must not change during a session."""
        ...

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        """System-prompt sections that may change every call (after the cache breakpoint)."""
        ...

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        """Blocks put before the latest user message for this call only (never stored)."""
        ...


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
    # Tokens each context section contributed (its static, dynamic and transient parts), by name:
    # a finer view of part of `breakdown`, not added to `estimated_tokens` again.
    sections: dict[str, int] = field(default_factory=dict)


def _text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def section_name(section: ContextSection) -> str:
    return str(getattr(section, "name", type(section).__name__))


@lru_cache(maxsize=256)
def _stable_text_tokens(text: str) -> int:
    # Guidance texts repeat on every call of every session: count each once.
    return estimate_text_tokens(text)


def _with_cache_control(block: dict) -> dict:
    marked = dict(block)
    marked["cache_control"] = CACHE_CONTROL
    return marked


def build_request(
    *,
    session: SessionSnapshot,
    history: PreparedHistory | Sequence[StoredMessage],
    server_tools: Sequence[ToolSpec],
    max_tokens: int,
    sections: Sequence[ContextSection] | None = None,
) -> BuiltRequest:
    if sections is None:
        from sessions_app.engine.features import features

        sections = features().sections
    prepared = history if isinstance(history, PreparedHistory) else PreparedHistory(history)
    static_parts = [session.system_prompt] if session.system_prompt else []
    dynamic_parts: list[str] = []
    prefix_parts: list[str] = []
    by_section: dict[str, int] = {}
    dynamic_tokens = transient_tokens = 0
    for section in sections:
        static, dynamic, prefix = (
            section.static_system(session),
            section.dynamic_system(session),
            section.message_prefix(session),
        )
        static_parts += static
        dynamic_parts += dynamic
        prefix_parts += prefix
        # Each part is counted once, here; the breakdown below adds these counts up.
        section_dynamic = sum(estimate_text_tokens(p) for p in dynamic if p)
        section_transient = sum(estimate_text_tokens(p) for p in prefix if p)
        dynamic_tokens += section_dynamic
        transient_tokens += section_transient
        name = section_name(section)
        by_section[name] = (
            by_section.get(name, 0)
            + sum(_stable_text_tokens(p) for p in static if p)
            + section_dynamic
            + section_transient
        )

    tools = [spec.definition() for spec in server_tools] + [dict(t) for t in session.client_tools]
    static_text = "\n\n".join(p for p in static_parts if p)
    system: list[dict] = []
    if static_text:
        system.append(_with_cache_control(_text_block(static_text)))
    elif tools:
        tools[-1] = _with_cache_control(tools[-1])
    system += [_text_block(p) for p in dynamic_parts if p]

    # The prepared messages are shared with later steps: only copies are changed here.
    merged = list(prepared.messages)
    prefix_blocks = [_text_block(p) for p in prefix_parts if p]
    latest_user = next((i for i in range(len(merged) - 1, -1, -1) if merged[i]["role"] == "user"), None)
    changed: set[int] = set()
    # The second breakpoint marks the last stored block before anything injected for this call.
    target_message, target_block = len(merged) - 1, -1
    if prefix_blocks and latest_user is not None:
        content = merged[latest_user]["content"]
        # Before the latest stored message's own blocks (it may be merged after others), and
        # after its tool results: the API wants tool_result blocks first in a user message.
        split = len(content) - len(prepared.stored[-1].content) if latest_user == len(merged) - 1 else 0
        while split < len(content) and content[split].get("type") == "tool_result":
            split += 1
        merged[latest_user] = {"role": "user", "content": content[:split] + prefix_blocks + content[split:]}
        changed.add(latest_user)
        target_message, target_block = (latest_user, split - 1) if split > 0 else (latest_user - 1, -1)
    if target_message >= 0:
        marked = merged[target_message]
        content = list(marked["content"])
        content[target_block] = _with_cache_control(copy.copy(content[target_block]))
        merged[target_message] = {"role": marked["role"], "content": content}
        changed.add(target_message)

    head: dict[str, Any] = {"model": session.model, "max_tokens": max_tokens}
    if system:
        head["system"] = system
    if tools:
        head["tools"] = tools
    body = {**head, "messages": merged}
    record = {**head, "messages": prepared.record(merged, changed)}
    parts = [
        canonical_json(merged[i]) if i in changed else prepared.encoded_message(i) for i in range(len(merged))
    ]
    # The canonical JSON of `body` without encoding the unchanged messages again: the head is
    # encoded with a unique placeholder where the messages go.
    marker = uuid.uuid4().hex
    before, after = canonical_json({**head, "messages": marker}).split(f'"{marker}"'.encode())
    encoded = before + b"[" + b",".join(parts) + b"]" + after

    breakdown = {
        "system": _stable_text_tokens(static_text) if static_text else 0,
        "dynamic_system": dynamic_tokens,
        "tools": estimate_json_tokens(tools) if tools else 0,
        "history": prepared.token_total,
        "transient": transient_tokens,
    }
    return BuiltRequest(
        body=body,
        record=record,
        estimated_tokens=sum(breakdown.values()),
        breakdown=breakdown,
        encoded=encoded,
        sections=by_section,
    )
