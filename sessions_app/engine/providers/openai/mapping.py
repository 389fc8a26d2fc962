"""An engine request (Anthropic Messages format) as a Chat Completions request.

The engine builds one request shape for every provider (`context.build_request`); this maps it,
keeping what the model sees where it sees it today:
- the system blocks become the one system message, first (their texts in order, joined by a
  blank line: every compatible server takes a single string);
- an assistant message's text blocks become its `content`, its `tool_use` blocks its
  `tool_calls` (the input as a JSON string);
- a user message's `tool_result` blocks become `role: tool` messages right after the assistant
  message that asked (the API requires each call answered before anything else), and its other
  blocks (the user's text, the scratchpad and the other per-call blocks the engine puts into the
  latest user message) a user message after them, in their order (one text block as a string;
  with `join_text`, any text blocks as one string, joined by a blank line);
- the tools become `function` tools, in their order.
Anthropic's `cache_control` marks are dropped: OpenAI caches a request's longest previously seen
prefix by itself, which the engine's stable order (tools, system, history) keeps long.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from sessions_app.common.model_names import model_name_split

SYSTEM_SEPARATOR = "\n\n"
USER_TEXT_SEPARATOR = "\n\n"
# A failed tool's result carries Anthropic's `is_error`; Chat Completions has no such flag, so
# the model reads it in the text.
TOOL_ERROR_PREFIX = "Error: "
# What stands for a block a `role: tool` message cannot hold (Chat Completions tool results are text).
NON_TEXT_RESULT = "[a {kind} block of the tool's result, which this model cannot be shown]"
# OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse `max_tokens`);
# compatible servers know `max_tokens`.
OPENAI_API_HOST = "api.openai.com"


def max_tokens_field(base_url: str | None) -> str:
    """The output budget's field name for the server at `base_url` (None: OpenAI's own)."""
    if base_url is None or urlsplit(base_url).hostname == OPENAI_API_HOST:
        return "max_completion_tokens"
    return "max_tokens"


def _text_of(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    parts = []
    for block in blocks or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        else:
            parts.append(NON_TEXT_RESULT.format(kind=block.get("type", "unknown")))
    return "\n".join(parts)


def _user_part(block: dict[str, Any]) -> dict[str, Any]:
    """A user message's content part for one of its blocks: text, or an image as a URL."""
    if block.get("type") == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}
    if block.get("type") == "text":
        return {"type": "text", "text": block.get("text", "")}
    return {"type": "text", "text": _text_of([block])}


def _user_messages(content: Any, join_text: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    messages: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "tool_result":
            text = _text_of(block.get("content", ""))
            if block.get("is_error"):
                text = TOOL_ERROR_PREFIX + text
            messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        else:
            others.append(_user_part(block))
    if others:
        # One text block (the usual user message) as a plain string, the most widely accepted;
        # with `join_text`, several text blocks too (the engine's per-call blocks, a summary and
        # the turn it carries): for a server whose chat template adds the content to a string
        # (SmolLM2's under llama-cpp-python's), which fails on a list of parts. An image keeps it.
        only_text = all(part["type"] == "text" for part in others)
        if only_text and (join_text or len(others) == 1):
            text = USER_TEXT_SEPARATOR.join(part["text"] for part in others)
            messages.append({"role": "user", "content": text})
        else:
            messages.append({"role": "user", "content": others})
    return messages


def _assistant_message(content: Any, join_text: bool = False) -> dict[str, Any]:
    """An assistant message; with `join_text` (a server that takes only strings) its content is
    never null: "" when it only calls tools."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts = [b.get("text", "") for b in content if b.get("type") == "text" and b.get("text")]
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {
                "name": b["name"],
                "arguments": json.dumps(b.get("input") or {}, ensure_ascii=False),
            },
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": SYSTEM_SEPARATOR.join(texts) if texts else ("" if join_text else None),
    }
    if calls:
        message["tool_calls"] = calls
    return message


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return SYSTEM_SEPARATOR.join(b.get("text", "") for b in system or [] if b.get("text"))


def chat_messages(body: dict[str, Any], *, join_text: bool = False) -> list[dict[str, Any]]:
    """The Chat Completions messages of an engine request: the system message, then the history."""
    messages: list[dict[str, Any]] = []
    system = _system_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if message.get("role") == "assistant":
            messages.append(_assistant_message(message.get("content"), join_text))
        else:
            messages.extend(_user_messages(message.get("content"), join_text))
    return messages


def chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def chat_request(body: dict[str, Any], *, base_url: str | None, join_text: bool = False) -> dict[str, Any]:
    """The Chat Completions parameters for the engine's request `body` (without `stream`: the
    provider asks for the stream and its usage). The model is sent without a provider prefix."""
    params: dict[str, Any] = {"model": model_name_split(str(body["model"]))[1]}
    if body.get("tools"):
        params["tools"] = chat_tools(body["tools"])
        # OpenAI's default with tools, said outright: llama-cpp-python's `chatml-function-calling`
        # shows the model the tools only when a request names a choice (docs/real-model.md).
        params["tool_choice"] = "auto"
    params["messages"] = chat_messages(body, join_text=join_text)
    if body.get("max_tokens"):
        params[max_tokens_field(base_url)] = body["max_tokens"]
    return params


def has_parts_list(params: dict[str, Any]) -> bool:
    """Whether a request sends some message's content as a list of parts."""
    return any(isinstance(m.get("content"), list) for m in params.get("messages") or [])


def has_null_content(params: dict[str, Any]) -> bool:
    """Whether a request sends an assistant message whose content is null (only tool calls)."""
    return any(
        m.get("role") == "assistant" and m.get("content") is None for m in params.get("messages") or []
    )
