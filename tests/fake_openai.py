"""A local fake of OpenAI's Chat Completions API, served over real HTTP and SSE.

Tests point the real ``openai`` SDK at it (``base_url=server.url`` or ``OPENAI_BASE_URL``), so the
SDK's request building, SSE parsing and retries are exercised without network access or patching.
It shares the Messages fake's test-facing interface (``tests/fake_anthropic.py``: ``enqueue`` of
``Reply``/``text``/``tool_use``/``error``/``truncated``/..., ``requests``, ``strict``, ``window``),
so that one scenario runs against either provider:

- a ``Reply``'s content blocks are answered as Chat Completions chunks (text as ``content``
  deltas, each ``tool_use`` as a streamed ``tool_calls`` entry whose arguments come in pieces);
- each recorded request keeps what was sent (``chat``) and, as ``body``, the same request read
  back into Messages form by this fake's own reading (``messages_view``: the system message as
  ``system``, ``role: tool`` messages as ``tool_result`` blocks of one user message with the user
  text that follows them, ``tool_calls`` as ``tool_use`` blocks); reply callables get that view.

Usage follows OpenAI's: ``prompt_tokens``, ``completion_tokens`` and
``prompt_tokens_details.cached_tokens`` (automatic prefix caching: the longest prefix of whole
tools and messages a previous request began with, from ``cache_min_tokens`` on, in steps of
``CACHE_STEP_TOKENS``), sent in a last chunk only when the request asks
(``stream_options.include_usage``) and the fake is not ``send_usage=False`` (servers that never
send usage) nor ``stream_usage=False`` (llama-cpp-python's server: usage in every answer that is not
streamed, never in a stream; in that mode an unstreamed request, a client's count of a prompt,
is answered with ``default_reply`` and leaves the queue to the streamed answers).
``string_contents=True`` is a server whose chat template takes only string contents (SmolLM2's
under llama-cpp-python's server): a message whose content is a list of parts fails the template,
and the stream ends at once with no chunk, as that server's does. ``strict`` refuses, with
OpenAI's 400 error shape, what the real API refuses: an assistant's ``tool_calls`` not answered
by ``role: tool`` messages right after it, a ``tool`` message that answers no preceding call, bad
tool names, malformed messages.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tests.fake_anthropic import (
    Broken,
    ErrorReply,
    FakeAnthropicServer,
    RecordedRequest,
    Reply,
    ReplySpec,
    _Handler,
    _split_text,
    aborted,
    count_tokens,
    error,
    stalled,
    text,
    tool_use,
    truncated,
)

__all__ = [
    "ChatErrorReply",
    "ChatRecordedRequest",
    "ErrorReply",
    "FakeOpenAIServer",
    "Reply",
    "aborted",
    "context_length_error",
    "count_tokens",
    "error",
    "messages_view",
    "stalled",
    "strict_problems",
    "text",
    "tool_use",
    "tool_use_raw",
    "truncated",
]

CHAT_PATH = "/v1/chat/completions"
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ROLES = {"system", "developer", "user", "assistant", "tool"}
# OpenAI caches prompts from 1,024 tokens on, in steps of 128.
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
# The provider marks a failed tool's result so (sessions_app/engine/providers/openai/mapping.py);
# the view reads it back as `is_error`.
TOOL_ERROR_PREFIX = "Error: "
FINISH_REASONS = {"tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


@dataclass
class ChatRecordedRequest(RecordedRequest):
    # The request as it was sent (Chat Completions); `body` is its Messages-form view.
    chat: dict[str, Any] = field(default_factory=dict)
    cached_tokens: int = 0


@dataclass
class ChatErrorReply(ErrorReply):
    """An error answered as OpenAI does (`{"error": {"message", "type", "param", "code"}}`)."""

    code: str | None = None


def context_length_error(window: int, prompt: int) -> ChatErrorReply:
    """The 400 OpenAI answers for a prompt over the model's window."""
    return ChatErrorReply(
        400,
        "invalid_request_error",
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{prompt} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    )


def _text_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"
    )


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content or []:
        if part.get("type") == "image_url":
            blocks.append({"type": "image", "source": {"type": "url", "url": part["image_url"]["url"]}})
        else:
            blocks.append({"type": "text", "text": part.get("text", "")})
    return blocks


def messages_view(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request read back into Messages form, for tests written against it."""
    view: dict[str, Any] = {"model": chat.get("model")}
    for key in ("max_tokens", "max_completion_tokens"):
        if key in chat:
            view["max_tokens"] = chat[key]
    if chat.get("tools"):
        view["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {}),
            }
            for t in chat["tools"]
        ]
    systems = [
        _text_content(m.get("content")) for m in chat.get("messages") or [] if m.get("role") == "system"
    ]
    if systems:
        view["system"] = "\n\n".join(systems)
    messages: list[dict[str, Any]] = []
    for message in chat.get("messages") or []:
        role = message.get("role")
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": _text_content(message["content"])})
            for call in message.get("tool_calls") or []:
                arguments = call["function"].get("arguments") or "{}"
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": json.loads(arguments),
                    }
                )
            messages.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            content = _text_content(message.get("content"))
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
            if content.startswith(TOOL_ERROR_PREFIX):
                block.update(content=content[len(TOOL_ERROR_PREFIX) :], is_error=True)
            else:
                block["content"] = content
            new = [block]
        elif role == "user":
            new = _user_blocks(message.get("content"))
        else:
            continue
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(new)
        else:
            messages.append({"role": "user", "content": new})
    view["messages"] = messages
    return view


def _unanswered(waiting: set[str]) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(sorted(waiting))
    )


def strict_problems(chat: dict[str, Any]) -> list[str]:
    """What the real API would refuse in a request: its messages' roles and tool pairs, its names."""
    problems: list[str] = []
    for index, tool in enumerate(chat.get("tools") or []):
        name = (tool.get("function") or {}).get("name")
        if tool.get("type") != "function" or not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            problems.append(f"Invalid 'tools[{index}].function.name': string does not match pattern.")
    messages = chat.get("messages") or []
    waiting: set[str] = set()  # the calls of the last assistant message not answered yet
    answering = False  # only tool messages since that assistant message
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            problems.append(f"Invalid value for 'messages[{index}].role': {role!r}.")
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not answering or call_id not in waiting:
                problems.append(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{index}], tool_call_id {call_id!r})."
                )
            waiting.discard(call_id)
            if not isinstance(message.get("content"), str | list):
                problems.append(f"Invalid 'messages[{index}].content': expected a string.")
            continue
        if waiting:
            problems.append(_unanswered(waiting))
        waiting, answering = set(), False
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if message.get("content") is None and not calls:
                problems.append(
                    f"Invalid 'messages[{index}].content': an assistant message needs content or tool_calls."
                )
            for call in calls:
                function = call.get("function") or {}
                if not TOOL_NAME_RE.match(str(function.get("name", ""))):
                    problems.append(
                        f"Invalid 'messages[{index}].tool_calls.function.name': string does not match "
                        "pattern."
                    )
                if not isinstance(function.get("arguments"), str):
                    problems.append(
                        f"Invalid 'messages[{index}].tool_calls.function.arguments': expected a string."
                    )
                waiting.add(call.get("id"))
            answering = bool(calls)
        elif message.get("content") is None:
            problems.append(f"Invalid 'messages[{index}].content': expected a string or an array of parts.")
    if waiting:
        problems.append(_unanswered(waiting))
    return problems


def _prompt_parts(chat: dict[str, Any]) -> list[Any]:
    return [*(chat.get("tools") or []), *(chat.get("messages") or [])]


class FakeOpenAIServer(FakeAnthropicServer):
    """Chat Completions fake on 127.0.0.1 with a FIFO queue of scripted replies (`url` ends in
    `/v1`, as OpenAI's base URL does)."""

    def __init__(
        self,
        *,
        token_ratio: float = 1.0,
        latency_seconds: float = 0.0,
        chunk_delay_seconds: float = 0.0,
        strict: bool = False,
        window: int | None = None,
        send_usage: bool = True,
        stream_usage: bool = True,
        string_contents: bool = False,
        cache_min_tokens: int = CACHE_MIN_TOKENS,
    ) -> None:
        super().__init__(
            token_ratio=token_ratio,
            latency_seconds=latency_seconds,
            chunk_delay_seconds=chunk_delay_seconds,
            strict=strict,
            window=window,
        )
        self.send_usage = send_usage
        self.stream_usage = stream_usage
        self.string_contents = string_contents
        self.cache_min_tokens = cache_min_tokens
        self.requests: list[ChatRecordedRequest] = []  # type: ignore[assignment]
        self._prefixes: set[str] = set()

    def start(self) -> FakeOpenAIServer:
        super().start()
        self.url += "/v1"
        return self

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._prefixes.clear()

    def clear_cache(self) -> None:
        super().clear_cache()
        with self._lock:
            self._prefixes.clear()

    def count_prompt_tokens(self, body: dict[str, Any]) -> int:
        """Prompt tokens of a Chat Completions request: each tool and message, as the fake counts."""
        return sum(count_tokens(p, self.token_ratio) for p in _prompt_parts(body))

    def _cached(self, chat: dict[str, Any]) -> int:
        """Tokens of the longest prefix (whole tools and messages) a previous request began with,
        from `cache_min_tokens` on, in steps of CACHE_STEP_TOKENS; this request's prefixes are
        remembered. Runs under the lock."""
        parts = _prompt_parts(chat)
        digest = hashlib.sha256(json.dumps(chat.get("model")).encode())
        hit = total = 0
        hashes = []
        for part in parts:
            digest.update(json.dumps(part, sort_keys=True).encode() + b"\x00")
            total += count_tokens(part, self.token_ratio)
            key = digest.hexdigest()
            hashes.append(key)
            if key in self._prefixes:
                hit = total
        self._prefixes.update(hashes)
        if hit < self.cache_min_tokens:
            return 0
        return hit // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS

    def _handle(self, handler: _Handler, method: str) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        arrived = time.monotonic()
        try:
            chat = json.loads(raw) if raw else {}
        except ValueError:
            chat = None
        chat = chat if isinstance(chat, dict) else {}
        record = ChatRecordedRequest(
            handler.path, {k.lower(): v for k, v in handler.headers.items()}, {}, chat=chat
        )
        record.started, record.raw, record.client_port = arrived, raw, handler.client_address[1]
        with self._lock:
            (self.requests if method == "POST" and path == CHAT_PATH else self.other_requests).append(record)
        if method != "POST" or path != CHAT_PATH:
            return _send_error(
                handler, ErrorReply(404, "invalid_request_error", f"Unknown request URL: {path}")
            )
        if not chat.get("model") or not chat.get("messages"):
            return _send_error(
                handler, ErrorReply(400, "invalid_request_error", "you must provide a model and messages")
            )
        if self.strict and (problems := strict_problems(chat)):
            return _send_error(handler, ErrorReply(400, "invalid_request_error", " ".join(problems)))
        record.body = messages_view(chat)
        if self.string_contents and chat.get("stream") and _list_contents(chat):
            return _send_sse(handler, [], 0.0, None, self._stopping)
        if self.string_contents and _null_assistant_content(chat):
            # llama-cpp-python's request schema: an assistant message's content is a string.
            return _send_error(
                handler,
                ErrorReply(
                    500,
                    "internal_server_error",
                    "1 validation error: {'type': 'string_type', 'loc': ('body', 'messages', 'content'), "
                    "'msg': 'Input should be a valid string', 'input': None}",
                    {"x-should-retry": "false"},
                ),
            )
        prompt = self.count_prompt_tokens(chat)
        record.prompt_tokens = prompt
        budget = int(chat.get("max_completion_tokens") or chat.get("max_tokens") or 0)
        if self.window is not None and prompt + budget > self.window:
            return _send_error(handler, context_length_error(self.window, prompt + budget))

        counting = not self.stream_usage and not chat.get("stream")
        with self._lock:
            spec: ReplySpec = self._queue.popleft() if self._queue and not counting else self.default_reply
        try:
            reply = spec(record.body) if callable(spec) else spec
        except Exception as exc:  # the test's bug, as an API error rather than a hung request
            reply = ErrorReply(
                500, "server_error", f"fake reply callable raised {exc!r}", {"x-should-retry": "false"}
            )
        if self.latency_seconds:
            time.sleep(self.latency_seconds)
        if isinstance(reply, ErrorReply):
            return _send_error(handler, reply)
        broken = reply if isinstance(reply, Broken) else None
        answer = reply.reply if isinstance(reply, Broken) else reply
        with self._lock:
            cached = record.cached_tokens = self._cached(chat)
        completion = answer.output_tokens
        if completion is None:
            completion = sum(count_tokens(b, self.token_ratio) for b in answer.content)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        if chat.get("stream"):
            asked = bool((chat.get("stream_options") or {}).get("include_usage"))
            include_usage = self.send_usage and self.stream_usage and asked
            record.usage = usage if include_usage else None
            chunks = _chunks(chat["model"], answer, usage if include_usage else None)
            _send_sse(handler, chunks, self.chunk_delay_seconds, broken, self._stopping)
        else:
            record.usage = usage if self.send_usage else None
            handler.send_json(200, _whole(chat["model"], answer, record.usage))
        record.ended = time.monotonic()


def _null_assistant_content(chat: dict[str, Any]) -> bool:
    return any(m.get("role") == "assistant" and m.get("content") is None for m in chat.get("messages") or [])


def _list_contents(chat: dict[str, Any]) -> bool:
    return any(isinstance(m.get("content"), list) for m in chat.get("messages") or [])


def _send_error(handler: _Handler, reply: ErrorReply) -> None:
    code = reply.code if isinstance(reply, ChatErrorReply) else None
    body = {"error": {"message": reply.message, "type": reply.type, "param": None, "code": code}}
    handler.send_json(reply.status, body, {"x-request-id": "req_" + uuid.uuid4().hex[:24]} | reply.headers)


def _finish_reason(answer: Reply) -> str:
    if any(b.get("type") == "tool_use" for b in answer.content):
        return "tool_calls"
    return FINISH_REASONS.get(answer.stop_reason, "stop")


def _arguments(block: dict[str, Any], *, ensure_ascii: bool = True) -> str:
    """A tool call's arguments as sent: its input as JSON, or the block's `raw_arguments` as they
    are (`tool_use_raw`)."""
    raw = block.get("raw_arguments")
    return raw if isinstance(raw, str) else json.dumps(block["input"], ensure_ascii=ensure_ascii)


def tool_use_raw(name: str, arguments: str) -> Reply:
    """A tool call whose arguments are sent as this text, exactly (what a server's grammar let a
    model write: a raw newline inside a string, say); its `input` is what a lenient reading gives."""
    reply = tool_use(name, json.loads(arguments, strict=False))
    reply.content[-1]["raw_arguments"] = arguments
    return reply


def _chunks(model: str, answer: Reply, usage: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The chunks OpenAI streams for `answer`: the role, the text's pieces, each tool call (its id
    and name, then its arguments in pieces), the finish reason, then the usage when asked for."""
    base = {
        "id": "chatcmpl-" + uuid.uuid4().hex[:24],
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    extra = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for block in answer.content:
        if block.get("type") == "text":
            chunks += [chunk({"content": piece}) for piece in _split_text(block["text"])]
    calls = [b for b in answer.content if b.get("type") == "tool_use"]
    for index, block in enumerate(calls):
        head = {
            "index": index,
            "id": block["id"],
            "type": "function",
            "function": {"name": block["name"], "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        arguments = _arguments(block, ensure_ascii=False)
        for start in range(0, len(arguments), 7):
            piece = {"index": index, "function": {"arguments": arguments[start : start + 7]}}
            chunks.append(chunk({"tool_calls": [piece]}))
    chunks.append(chunk({}, _finish_reason(answer)))
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


def _whole(model: str, answer: Reply, usage: dict[str, Any] | None) -> dict[str, Any]:
    texts = "".join(b["text"] for b in answer.content if b.get("type") == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": _arguments(b)},
        }
        for b in answer.content
        if b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": texts or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(answer)}
        ],
        "usage": usage,
    }


def _send_sse(
    handler: _Handler, chunks: list[dict[str, Any]], delay: float, broken: Broken | None, stopping: Any
) -> None:
    """`data:` lines, then `data: [DONE]`; chunked, so the connection stays reusable."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()

    def write(data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    try:
        for index, item in enumerate(chunks):
            if broken is not None and index == broken.after_events:
                if broken.how == "end":
                    handler.wfile.write(b"0\r\n\r\n")
                    return
                if broken.how == "error":
                    write(
                        json.dumps(
                            {
                                "error": {
                                    "message": "The server had an error while processing your request.",
                                    "type": "server_error",
                                    "param": None,
                                    "code": None,
                                }
                            }
                        )
                    )
                    handler.wfile.write(b"0\r\n\r\n")
                    return
                if broken.how == "abort":
                    handler.wfile.flush()
                    handler.close_connection = True
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                if broken.how == "stall":
                    stopping.wait(broken.stall_seconds)
            if index and delay:
                time.sleep(delay)
            write(json.dumps(item))
        write("[DONE]")
        handler.wfile.write(b"0\r\n\r\n")
    except OSError:  # the client hung up mid-stream
        handler.close_connection = True
