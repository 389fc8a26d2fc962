"""The prompt inspector: a recorded model call's exact request, block by block."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from sessions_app import selectors
from sessions_app.dashboard.selectors.common import NotFound
from sessions_app.dashboard.selectors.prefix_break import PrefixBreak, prefix_break
from sessions_app.models import ModelCall

# The prompt inspector shows a request's last messages; the whole body is a download away.
INSPECTOR_MESSAGES_SHOWN = 40


@dataclass(frozen=True)
class InspectedBlock:
    type: str
    text: str  # the text of a text block, else the block as JSON
    cached: bool  # carries a cache breakpoint (cache_control)
    # The reason the prefix shared with the previous request broke at this block, if it did.
    broke: str = ""


@dataclass(frozen=True)
class InspectedMessage:
    index: int
    role: str
    blocks: list[InspectedBlock]


@dataclass(frozen=True)
class InspectedTool:
    name: str
    definition_json: str
    cached: bool
    broke: str = ""  # as InspectedBlock's


@dataclass(frozen=True)
class InspectedRequest:
    call: ModelCall
    body: dict[str, Any]
    verified: bool
    system: list[InspectedBlock]
    tools: list[InspectedTool]
    messages: list[InspectedMessage]  # the last INSPECTOR_MESSAGES_SHOWN
    hidden_messages: int
    breakpoints: int
    stable_prefix_ratio: float
    previous_id: int | None
    next_id: int | None
    # Where this request stopped sharing the previous one's prefix (None: the first request).
    prefix_break: PrefixBreak | None = None
    # The break's message is among those shown (or the break is not in the messages).
    break_shown: bool = True
    # The share of this request's prompt before the point where it parts from the previous
    # request's (what the prompt cache could read at best), None for a session's first request.
    # Not `stable_prefix_ratio`, which compares the canonical JSON's bytes: there `max_tokens`
    # comes before the tools, and a small window lowers it at every call.
    prefix_kept_ratio: float | None = None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _inspected_block(block: Any, broke: str = "") -> InspectedBlock:
    if not isinstance(block, dict):
        return InspectedBlock("text", str(block), False, broke)
    cached = "cache_control" in block
    if block.get("type") == "text":
        return InspectedBlock("text", str(block.get("text", "")), cached, broke)
    shown = {k: v for k, v in block.items() if k != "cache_control"}
    return InspectedBlock(str(block.get("type")), _json(shown), cached, broke)


def _broke_at(found: PrefixBreak | None, where: str, index: int, block: int = 0) -> str:
    """The break's reason (`—` for a break without one: this request extends the previous) when
    it is at this block, else ""."""
    if found is None or found.where != where or found.index != index or found.block != block:
        return ""
    return found.reason or "—"


def model_call_get(*, session_id: uuid.UUID, call_id: Any = None) -> ModelCall | None:
    """The session's model call `call_id`, or its latest; None when it has made none."""
    calls = ModelCall.objects.filter(session_id=session_id)
    if call_id in (None, ""):
        return calls.order_by("-started_at", "-pk").first()
    try:
        pk = int(call_id)
    except (TypeError, ValueError) as exc:
        raise NotFound from exc
    call = calls.filter(pk=pk).first()
    if call is None:
        raise NotFound
    return call


def request_inspect(*, call: ModelCall) -> InspectedRequest:
    """The exact request of `call` (rebuilt and checked against its SHA-256), block by block."""
    body = selectors.model_call_request(call=call)
    found = prefix_break(call=call, body=body)
    system_value = body.get("system", [])
    system = (
        [InspectedBlock("text", system_value, False, _broke_at(found, "system", 0))]
        if isinstance(system_value, str)
        else [_inspected_block(b, _broke_at(found, "system", i)) for i, b in enumerate(system_value)]
    )
    tools = [
        InspectedTool(
            name=str(t.get("name", "")),
            definition_json=_json({k: v for k, v in t.items() if k != "cache_control"}),
            cached="cache_control" in t,
            broke=_broke_at(found, "tools", i),
        )
        for i, t in enumerate(body.get("tools", []))
    ]
    all_messages = body.get("messages", [])
    first_shown = max(0, len(all_messages) - INSPECTOR_MESSAGES_SHOWN)
    messages = [
        InspectedMessage(
            index=index,
            role=str(m.get("role")),
            blocks=[
                _inspected_block(b, _broke_at(found, "messages", index, j))
                for j, b in enumerate(
                    m["content"] if isinstance(m.get("content"), list) else [m.get("content")]
                )
            ],
        )
        for index, m in enumerate(all_messages)
        if index >= first_shown
    ]
    breakpoints = (
        sum(b.cached for b in system)
        + sum(t.cached for t in tools)
        + sum(
            1
            for m in all_messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and "cache_control" in b
        )
    )
    siblings = ModelCall.objects.filter(session_id=call.session_id)
    previous = (
        siblings.filter(Q(started_at__lt=call.started_at) | Q(started_at=call.started_at, pk__lt=call.pk))
        .order_by("-started_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    following = (
        siblings.filter(Q(started_at__gt=call.started_at) | Q(started_at=call.started_at, pk__gt=call.pk))
        .order_by("started_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )
    return InspectedRequest(
        call=call,
        body=body,
        verified=selectors.model_call_request_verified(call=call),
        system=system,
        tools=tools,
        messages=messages,
        hidden_messages=first_shown,
        breakpoints=breakpoints,
        stable_prefix_ratio=(call.stable_prefix_bytes / call.request_bytes) if call.request_bytes else 0.0,
        previous_id=previous,
        next_id=following,
        prefix_break=found,
        break_shown=found is None or found.where != "messages" or found.index >= first_shown,
        prefix_kept_ratio=_prefix_kept(call, found),
    )


def _prefix_kept(call: ModelCall, found: PrefixBreak | None) -> float | None:
    if found is None:
        return None
    prompt = call.input_tokens + call.cache_read_input_tokens + call.cache_creation_input_tokens
    prompt = prompt or call.estimated_prompt_tokens
    if not prompt:
        return None
    return max(0.0, min(1.0, 1 - found.tokens_after / prompt))
