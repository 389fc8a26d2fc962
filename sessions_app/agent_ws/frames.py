"""Validation of client frames (PROTOCOL.md, Client → server)."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

from django.conf import settings

# type -> {field: (accepted python types, required)}. Fields not listed are ignored, so that a
# newer client's additions do not break an older server.
_NUMBER = (int, float)
FRAME_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "session.create": {
        "title": ((str,), False),
        "model": ((str,), False),
        "system_prompt": ((str,), False),
        "context_window": ((int,), False),
        "compact_threshold": (_NUMBER, False),
        "tools": ((list,), False),
        "settings": ((dict,), False),
        # PROTOCOL.md v1.2: a session of this agent (a name).
        "agent": ((str,), False),
    },
    "session.attach": {
        "session_id": ((str,), True),
        "since_seq": ((int,), False),
        "since_seqs": ((dict,), False),
        # Additions (docs/clients.md): how many descendants to follow and replay at once.
        "descendants_limit": ((int,), False),
    },
    # Addition (docs/clients.md): follow and replay more descendants of the attached session.
    "session.follow": {
        "session_ids": ((list,), False),
        "since_seqs": ((dict,), False),
        "limit": ((int,), False),
    },
    "user.message": {"content": ((str,), True)},
    "tool.result": {
        "tool_use_id": ((str,), True),
        "content": ((str, list), True),
        "is_error": ((bool,), False),
    },
    # PROTOCOL.md v1.2: the answer to `tool.approval_requested`; `input_sha256` (docs/clients.md)
    # binds it to the input the client saw.
    "tool.approve": {"tool_use_id": ((str,), True), "input_sha256": ((str,), False)},
    "tool.deny": {
        "tool_use_id": ((str,), True),
        "reason": ((str,), False),
        "input_sha256": ((str,), False),
    },
    "turn.cancel": {},
    "session.get": {},
    # PROTOCOL.md v1.2: agents (their values are checked by engine.agents) and ending a session.
    "agent.create": {
        "name": ((str,), True),
        "system_prompt": ((str,), False),
        "model": ((str,), False),
        "settings": ((dict,), False),
    },
    "agent.get": {"name": ((str,), True)},
    "session.end": {"session_id": ((str,), False)},
    # PROTOCOL.md v1.2; the values are checked as session.create's are (engine.sessions).
    "session.update": {
        "session_id": ((str,), False),
        "title": ((str,), False),
        "context_window": ((int,), False),
        "compact_threshold": (_NUMBER, False),
        "settings": ((dict,), False),
    },
}
_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
    bool: "true or false",
}


# The largest integer a stored field can hold (PostgreSQL bigint, SQLite INTEGER): `since_seq`.
MAX_FRAME_INT = 2**63 - 1
# What PostgreSQL cannot store (U+0000) and what UTF-8 cannot encode (a lone surrogate, which
# JSON's \uD800 escapes can produce: a pair of escapes is joined into one character first).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class FrameError(ValueError):
    def __init__(self, code: str, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def frame_parse(text: str, *, max_bytes: int) -> dict[str, Any]:
    """Parse and check one client frame; raises `FrameError` with the protocol's error code."""
    # A str holds at most 4 bytes a character in UTF-8: only long frames need encoding to measure.
    if len(text) * 4 > max_bytes and len(text.encode("utf-8")) > max_bytes:
        raise FrameError("frame_too_large", f"frames are limited to {max_bytes} bytes")
    try:
        frame = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise FrameError("invalid_json", f"frame is not JSON: {exc.msg} at position {exc.pos}") from exc
    except RecursionError as exc:
        raise FrameError("invalid_json", "frame is nested too deeply") from exc
    except _NotJSON as exc:
        raise FrameError("invalid_json", f"frame is not JSON: {exc}") from exc
    except _Unrepresentable as exc:
        raise FrameError("invalid_frame", str(exc)) from exc
    except ValueError as exc:
        # Python's limit on the digits of an integer (4,300): the only other ValueError here.
        raise FrameError("invalid_frame", "a number in the frame has too many digits") from exc
    problem = _unstorable(frame)
    if problem is not None:
        raise FrameError("invalid_frame", problem)
    if not isinstance(frame, dict):
        raise FrameError("invalid_frame", "a frame must be a JSON object with a type")
    request_id = frame.get("request_id")
    if request_id is not None and (not isinstance(request_id, str | int) or isinstance(request_id, bool)):
        raise FrameError("invalid_frame", "request_id must be a string or an integer")
    frame_type = frame.get("type")
    if not isinstance(frame_type, str):
        raise FrameError("invalid_frame", "a frame needs a type (a string)", request_id)
    fields = FRAME_FIELDS.get(frame_type)
    if fields is None:
        raise FrameError("unknown_type", f"unknown frame type {frame_type!r}", request_id)
    for name, (types, required) in fields.items():
        if name not in frame or frame[name] is None:
            if required:
                raise FrameError("invalid_frame", f"{frame_type} needs the field {name}", request_id)
            continue
        value = frame[name]
        # bool is an int in Python; the protocol keeps them apart.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            expected = " or ".join(_TYPE_NAMES[t] for t in types if t in _TYPE_NAMES)
            raise FrameError("invalid_frame", f"{frame_type}: {name} must be {expected}", request_id)
    return frame


class _NotJSON(ValueError):
    pass


class _Unrepresentable(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (RFC 8259) and PostgreSQL's jsonb do not.
    raise _NotJSON(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unrepresentable(f"the number {text[:20]}… is too large")
    return value


def _unstorable(value: Any) -> str | None:
    """Why no database or client could hold `value`'s strings, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = _UNSTORABLE.search(item)
            if found is not None:
                if found.group() == "\x00":
                    # PostgreSQL cannot store U+0000 in text or JSON; refused on every database.
                    return "frames must not contain the character U+0000"
                return f"frames must be valid Unicode: a lone surrogate U+{ord(found.group()):04X}"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


# Content blocks the Messages API accepts inside a tool_result, and what each must carry.
TOOL_RESULT_BLOCK_TYPES = ("text", "image", "document", "search_result")


def _source_problem(kind: str, source: Any) -> str | None:
    if not isinstance(source, dict) or source.get("type") not in ("base64", "url", "text", "content"):
        return f"is an {kind} block without a valid source"
    if source["type"] == "base64" and not (
        isinstance(source.get("data"), str) and isinstance(source.get("media_type"), str)
    ):
        return f"is an {kind} block whose base64 source needs data and media_type"
    if source["type"] == "url" and not isinstance(source.get("url"), str):
        return f"is an {kind} block whose url source needs a url"
    return None


def _block_problem(block: Any) -> str | None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return "must be a content block with a type"
    kind = block["type"]
    if kind not in TOOL_RESULT_BLOCK_TYPES:
        return f"has type {kind!r}; a tool result holds blocks of type {', '.join(TOOL_RESULT_BLOCK_TYPES)}"
    if kind == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
        return "is a text block without text (the model API refuses empty text blocks)"
    if kind in ("image", "document"):
        return _source_problem(kind, block.get("source"))
    if kind == "search_result" and not (
        isinstance(block.get("source"), str)
        and isinstance(block.get("title"), str)
        and isinstance(block.get("content"), list)
    ):
        return "is a search_result block without source, title and content"
    return None


def tool_result_content_check(content: Any) -> None:
    """A tool result is a string, or a non-empty list of blocks the model API accepts there.

    Anything else would be stored in the history and make every later request fail.
    """
    if isinstance(content, str):
        return
    if not content:
        raise FrameError(
            "invalid_frame", "tool.result: content must be a string or a non-empty list of blocks"
        )
    for index, block in enumerate(content):
        problem = _block_problem(block)
        if problem:
            raise FrameError("invalid_frame", f"tool.result: content[{index}] {problem}")


def frame_request_id(text: str | None) -> Any:
    """The `request_id` of a frame refused unhandled, to echo it when the frame parses."""
    if text is None:
        return None
    try:
        return frame_parse(text, max_bytes=settings.PALIMPSEST_MAX_FRAME_BYTES).get("request_id")
    except FrameError:
        return None


def since_seqs_parse(value: Any, request_id: Any) -> dict[uuid.UUID, int]:
    """`session.attach`'s `since_seqs`: descendant session id → the last seq the client saw."""
    if not isinstance(value, dict):
        raise FrameError("invalid_frame", "session.attach: since_seqs must be an object", request_id)
    seqs: dict[uuid.UUID, int] = {}
    for key, seq in value.items():
        try:
            session_id = uuid.UUID(str(key))
        except ValueError:
            raise FrameError(
                "invalid_frame", f"session.attach: since_seqs key {key!r} is not a session id", request_id
            ) from None
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_FRAME_INT:
            raise FrameError(
                "invalid_frame",
                f"session.attach: since_seqs values must be integers from 0 to {MAX_FRAME_INT}",
                request_id,
            )
        seqs[session_id] = seq
    return seqs


def descendants_limit_parse(value: Any, name: str, request_id: Any) -> int:
    """How many descendants to follow at once: at most PALIMPSEST_ATTACH_DESCENDANTS (the
    default; a larger value is lowered to it)."""
    ceiling = settings.PALIMPSEST_ATTACH_DESCENDANTS
    if value is None:
        return ceiling
    if not 0 <= value <= MAX_FRAME_INT:
        raise FrameError("invalid_frame", f"{name} must be an integer from 0", request_id)
    return min(value, ceiling)


def session_ids_parse(value: Any, request_id: Any) -> set[uuid.UUID] | None:
    """`session.follow`'s `session_ids`: the descendants wanted (None: the next ones)."""
    if value is None:
        return None
    if len(value) > settings.PALIMPSEST_ATTACH_DESCENDANTS:
        raise FrameError(
            "invalid_frame",
            f"session.follow: at most {settings.PALIMPSEST_ATTACH_DESCENDANTS} session_ids at once",
            request_id,
        )
    ids = set()
    for item in value:
        try:
            ids.add(uuid.UUID(str(item)))
        except ValueError:
            raise FrameError(
                "invalid_frame", f"session.follow: {item!r} is not a session id", request_id
            ) from None
    return ids
