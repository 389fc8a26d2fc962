"""Validation of client frames (PROTOCOL.md, Client → server)."""

from __future__ import annotations

import json
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
    "session.attach": {"session_id": ((str,), True), "since_seq": ((int,), False)},
    "user.message": {"content": ((str,), True)},
    "tool.result": {
        "tool_use_id": ((str,), True),
        "content": ((str, list), True),
        "is_error": ((bool,), False),
    },
    "turn.cancel": {},
    "session.get": {},
}
_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
    bool: "true or false",
}


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
        frame = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FrameError("invalid_json", f"frame is not JSON: {exc.msg} at position {exc.pos}") from exc
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


def tool_result_content_check(content: Any) -> None:
    """A tool result is a string or a list of content blocks (objects with a type)."""
    if isinstance(content, str):
        return
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise FrameError(
                "invalid_frame", f"tool.result: content[{index}] must be a content block with a type"
            )
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise FrameError("invalid_frame", f"tool.result: content[{index}] is a text block without text")
