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
from collections.abc import Sequence
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


# Context sections, in prompt order; feature modules append themselves at import.
SECTIONS: list[ContextSection] = []


@dataclass
class BuiltRequest:
    body: dict[str, Any]
    # The body with every stored message sent unchanged replaced by {"$message": position}.
    record: dict[str, Any]
    estimated_tokens: int
    breakdown: dict[str, int] = field(default_factory=dict)
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
    history: Sequence[StoredMessage],
    server_tools: Sequence[ToolSpec],
    max_tokens: int,
    sections: Sequence[ContextSection] | None = None,
) -> BuiltRequest:
    sections = SECTIONS if sections is None else sections
    static_parts = [session.system_prompt] if session.system_prompt else []
    dynamic_parts: list[str] = []
    prefix_parts: list[str] = []
    by_section: dict[str, int] = {}
    for section in sections:
        static, dynamic, prefix = (
            section.static_system(session),
            section.dynamic_system(session),
            section.message_prefix(session),
        )
        static_parts += static
        dynamic_parts += dynamic
        prefix_parts += prefix
        name = section_name(section)
        by_section[name] = (
            by_section.get(name, 0)
            + sum(_stable_text_tokens(p) for p in static if p)
            + sum(estimate_text_tokens(p) for p in dynamic + prefix if p)
        )

    tools = [spec.definition() for spec in server_tools] + [dict(t) for t in session.client_tools]
    static_text = "\n\n".join(p for p in static_parts if p)
    system: list[dict] = []
    if static_text:
        system.append(_with_cache_control(_text_block(static_text)))
    elif tools:
        tools[-1] = _with_cache_control(tools[-1])
    system += [_text_block(p) for p in dynamic_parts if p]

    # Merge consecutive messages of one role (e.g. a user message after a turn that stopped on
    # tool results): the API wants alternation. `sources` keeps which stored messages made each.
    merged: list[dict] = []
    sources: list[list[StoredMessage]] = []
    for message in history:
        if merged and merged[-1]["role"] == message.role:
            merged[-1] = {"role": message.role, "content": merged[-1]["content"] + list(message.content)}
            sources[-1].append(message)
        else:
            merged.append({"role": message.role, "content": list(message.content)})
            sources.append([message])

    prefix_blocks = [_text_block(p) for p in prefix_parts if p]
    latest_user = max((i for i, m in enumerate(merged) if m["role"] == "user"), default=None)
    changed: set[int] = set()
    # The second breakpoint marks the last stored block before anything injected for this call.
    target_message, target_block = len(merged) - 1, -1
    if prefix_blocks and latest_user is not None:
        content = merged[latest_user]["content"]
        # Before the latest stored message's own blocks (it may be merged after others), and
        # after its tool results: the API wants tool_result blocks first in a user message.
        split = len(content) - len(sources[latest_user][-1].content)
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

    body: dict[str, Any] = {"model": session.model, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
    body["messages"] = merged

    record_messages: list[dict] = []
    for index, sent in enumerate(merged):
        group = sources[index]
        if index not in changed and len(group) == 1:
            record_messages.append({"$message": group[0].position})
        else:
            record_messages.append(sent)
    record = {k: v for k, v in body.items() if k != "messages"}
    record["messages"] = record_messages

    breakdown = {
        "system": estimate_text_tokens(static_text) if static_text else 0,
        "dynamic_system": sum(estimate_text_tokens(p) for p in dynamic_parts),
        "tools": estimate_json_tokens(tools) if tools else 0,
        "history": sum(m.token_estimate for m in history),
        "transient": sum(estimate_text_tokens(p) for p in prefix_parts),
    }
    return BuiltRequest(
        body=body,
        record=record,
        estimated_tokens=sum(breakdown.values()),
        breakdown=breakdown,
        sections=by_section,
    )
