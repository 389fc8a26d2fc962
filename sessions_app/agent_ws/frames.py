"""Validation of client frames (PROTOCOL.md, Client → server)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

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
    },
    "session.attach": {
        "session_id": ((str,), True),
        "since_seq": ((int,), False),
        "since_seqs": ((dict,), False),
    },
    "user.message": {"content": ((str,), True)},
    "tool.result": {
        "tool_use_id": ((str,), True),
        "content": ((str, list), True),
        "is_error": ((bool,), False),
    },
    "turn.cancel": {},
    "session.get": {},
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
