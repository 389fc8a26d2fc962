"""A streamed Chat Completions answer put together, chunk by chunk, into the engine's answer: its
content blocks (text, then the tool calls as `tool_use` blocks), stop reason and usage."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.providers.base import ProviderError, Usage

# Chat Completions' finish reasons as the engine's (Anthropic's) stop reasons.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class ChatAnswer:
    """What one streamed attempt has received so far."""

    def __init__(self) -> None:
        self.started = False  # the response's headers arrived: the SDK's retries are over
        self.streamed_text = False
        self.finish_reason: str | None = None
        self.texts: list[str] = []
        # The tool calls by their stream index: id, name and the pieces of their arguments.
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: Any = None
        self.id: str | None = None
        self.model: str | None = None
        self.chunks = 0

    def follow(self, chunk: Any) -> str:
        """Take one chunk in (the SDK's `ChatCompletionChunk`); the text it streams ("" if none)."""
        self.chunks += 1
        self.id = self.id or getattr(chunk, "id", None)
        self.model = self.model or getattr(chunk, "model", None)
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        text = ""
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue  # one answer asked for (n = 1)
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.texts.append(delta.content)
                    text += delta.content
                for call in delta.tool_calls or []:
                    self._call_delta(call)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return text

    def take(self, completion: Any) -> str:
        """Take a whole answer in (the SDK's `ChatCompletion`, not streamed); its text."""
        self.chunks += 1
        self.id = getattr(completion, "id", None)
        self.model = getattr(completion, "model", None)
        self.usage = getattr(completion, "usage", None)
        choices = [c for c in getattr(completion, "choices", None) or [] if getattr(c, "index", 0) == 0]
        if not choices:
            return ""
        choice = choices[0]
        self.finish_reason = choice.finish_reason or "stop"
        message = choice.message
        if message.content:
            self.texts.append(message.content)
        for index, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            self.calls[index] = {
                "id": call.id,
                "name": getattr(function, "name", "") or "",
                "arguments": [getattr(function, "arguments", "") or ""],
            }
        return message.content or ""

    def _call_delta(self, call: Any) -> None:
        entry = self.calls.setdefault(call.index, {"id": None, "name": "", "arguments": []})
        if call.id:
            entry["id"] = call.id
        function = call.function
        if function is not None:
            if function.name:
                entry["name"] += function.name
            if function.arguments:
                entry["arguments"].append(function.arguments)

    def check_complete(self) -> None:
        """A stream is an answer only once it said so (a finish reason), and each tool call has a
        name and a whole JSON object of arguments."""
        if self.finish_reason is None:
            raise ProviderError("the model's stream ended before the answer did", kind="stream")
        for entry in self.calls.values():
            if not entry["name"]:
                raise ProviderError("the model's stream sent a tool call without a name", kind="stream")
            text = "".join(entry["arguments"])
            try:
                # Not strict: a string may hold a raw control character (a newline), which a
                # server's JSON grammar lets a model write (llama.cpp's); the value is unambiguous.
                value = json.loads(text, strict=False) if text.strip() else {}
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ProviderError("the model's tool arguments were not a whole JSON object", kind="stream")
            entry["input"] = value

    def content(self) -> list[dict[str, Any]]:
        """The answer's blocks (after `check_complete`): its text, then its tool calls in order.
        A call the server sent without an id gets one (the history needs it to pair the result)."""
        blocks: list[dict[str, Any]] = []
        text = "".join(self.texts)
        if text:
            blocks.append({"type": "text", "text": text})
        for index in sorted(self.calls):
            entry = self.calls[index]
            blocks.append(
                {
                    "type": "tool_use",
                    "id": entry["id"] or f"call_{uuid.uuid4().hex[:24]}",
                    "name": entry["name"],
                    "input": entry["input"],
                }
            )
        return blocks

    def stop_reason(self) -> str:
        if self.calls:
            return "tool_use"  # some servers finish a tool call with `stop`
        return STOP_REASONS.get(self.finish_reason or "stop", "end_turn")

    def has_usage(self) -> bool:
        usage = self.usage
        return usage is not None and bool(usage.prompt_tokens or usage.completion_tokens)

    def usage_or_estimate(
        self, params: dict[str, Any], content: list[dict[str, Any]], *, counted_prompt: int | None = None
    ) -> tuple[Usage, str]:
        """The answer's usage as the engine counts it (cached prompt tokens are cache reads; OpenAI
        writes its cache for free), and where it came from: `served` (the stream's usage),
        `counted` (the stream sent none, and `counted_prompt` is the server's count of the same
        prompt, from a non-streamed request: the answer's tokens are then the local estimate), or
        `estimated` (neither: the request's and the answer's local estimates, so that the
        window's calibration still has a count)."""
        output = estimate_json_tokens(content) if content else 0
        if self.has_usage():
            usage = self.usage
            details = getattr(usage, "prompt_tokens_details", None)
            cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
            prompt = usage.prompt_tokens or 0
            return (
                Usage(
                    input_tokens=max(0, prompt - cached),
                    output_tokens=usage.completion_tokens or 0,
                    cache_read_input_tokens=min(cached, prompt),
                ),
                "served",
            )
        if counted_prompt:
            return Usage(input_tokens=counted_prompt, output_tokens=output), "counted"
        prompt = estimate_json_tokens([params.get("tools") or [], params["messages"]])
        return Usage(input_tokens=prompt, output_tokens=output), "estimated"
