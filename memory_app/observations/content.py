"""What an offloaded observation holds, how it is summarized, and `{{stepN.field}}` references.

Pure functions, no database: the services and selectors build on them.

The anatomy of a tool result (what is stored as the observation's content, what is metadata):
- an object with a string `content` field (fs_read's result, and the usual shape of a tool
  result): the content is that field; every other field is the observation's `metadata`, shown
  to the model as is. With `"encoding": "binary"` the content is base64 and the observation is
  **binary**: the decoded bytes are stored. (When the other fields together exceed
  METADATA_MAX_BYTES the result is taken whole, as below, so the model never sees them cut.)
- a string: the content is the string itself, unless it is the JSON text of an object, which is
  then read as that object (a client tool may answer with JSON text);
- content blocks (a client's answer): text blocks are joined into the content; a single block
  with a base64 `source` (an image or a document) is **binary**, with its `type` and
  `media_type` as metadata;
- anything else (an object without a string `content`, a list, a number): the content is the
  JSON text of the whole result (`content_is_json`), and the metadata is empty.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memory_app.files.prompts import BINARY_ENCODING  # fs_read's results are what it keeps as bytes
from memory_app.observations.models import ObservationKind
from memory_app.observations.prompts import OFFLOAD_NOTE, SUMMARY_BINARY
from sessions_app.common.content import content_text, text_clip_middle

# Seed 004: the summary is the first 500 characters, the omission placeholder, the last 500.
SUMMARY_HEAD_CHARS = 500
SUMMARY_TAIL_CHARS = 500
# A result's non-content fields are kept as metadata only up to this size of JSON.
METADATA_MAX_BYTES = 2048
SCRATCHPAD_READ = "scratchpad_read"  # the seed's tool name


@dataclass(frozen=True)
class ResultParts:
    kind: str
    text: str = ""
    data: bytes = b""
    metadata: dict[str, Any] = field(default_factory=dict)
    content_is_json: bool = False

    @property
    def is_binary(self) -> bool:
        return self.kind == ObservationKind.BINARY


def result_json_size(raw: Any) -> int:
    """The seed's measure: `len(json.dumps(observation))`."""
    return len(json.dumps(raw))


def _b64decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _json_object(text: str) -> dict | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _object_parts(obj: dict, raw_text: str | None) -> ResultParts:
    content = obj.get("content")
    if isinstance(content, str):
        metadata = {k: v for k, v in obj.items() if k != "content"}
        if len(json.dumps(metadata)) <= METADATA_MAX_BYTES:
            if metadata.get("encoding") == BINARY_ENCODING:
                data = _b64decode(content)
                if data is not None:
                    return ResultParts(ObservationKind.BINARY, data=data, metadata=metadata)
            return ResultParts(ObservationKind.TEXT, text=content, metadata=metadata)
    text = raw_text if raw_text is not None else json.dumps(obj, ensure_ascii=False)
    return ResultParts(ObservationKind.TEXT, text=text, content_is_json=True)


def _blocks_parts(blocks: list[dict]) -> ResultParts | None:
    if all(b.get("type") == "text" and isinstance(b.get("text"), str) for b in blocks):
        return ResultParts(ObservationKind.TEXT, text=content_text(blocks))
    if len(blocks) == 1:
        source = blocks[0].get("source")
        if (
            isinstance(source, dict)
            and source.get("type") == "base64"
            and isinstance(source.get("data"), str)
        ):
            data = _b64decode(source["data"])
            if data is not None:
                metadata = {"type": blocks[0]["type"], "media_type": source.get("media_type")}
                return ResultParts(ObservationKind.BINARY, data=data, metadata=metadata)
    return None


def result_parts(raw: Any) -> ResultParts:
    """Split a tool result into content and metadata (see the module's docstring)."""
    if isinstance(raw, str):
        obj = _json_object(raw)
        return _object_parts(obj, raw) if obj is not None else ResultParts(ObservationKind.TEXT, text=raw)
    if isinstance(raw, dict):
        return _object_parts(raw, None)
    if isinstance(raw, list) and raw and all(isinstance(b, dict) and "type" in b for b in raw):
        parts = _blocks_parts(raw)
        if parts is not None:
            return parts
    return ResultParts(ObservationKind.TEXT, text=json.dumps(raw, ensure_ascii=False), content_is_json=True)


def summary_text(text: str) -> str:
    """Seed 004's smart truncation: head, `[... N characters omitted ...]`, tail."""
    return text_clip_middle(text, head=SUMMARY_HEAD_CHARS, tail=SUMMARY_TAIL_CHARS)


def summary_binary(*, size: int, sha256: str) -> str:
    return SUMMARY_BINARY.format(size=size, sha256=sha256)


def synthetic_observation(
    *, observation_id: str, size_bytes: int, kind: str, summary: str, metadata: dict, ok: bool = True
) -> dict[str, Any]:
    """What the model is given instead of a large result (seed 004's example, key for key).

    `ok` is false when the tool reported an error (a client may answer with a large error).
    """
    return {
        "ok": ok,
        "scratchpad_id": observation_id,
        "size_bytes": size_bytes,
        "kind": kind,
        "summary": summary,
        "metadata": metadata,
        "_note": OFFLOAD_NOTE,
    }


def is_synthetic_observation(value: Any) -> bool:
    return isinstance(value, dict) and value.get("_note") == OFFLOAD_NOTE and "scratchpad_id" in value


# ---------------------------------------------------------------------------
# Text chunks
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    start_char: int
    start_byte: int
    start_line: int
    end_line: int  # the line of the chunk's last character


def text_chunks(text: str, size: int) -> Iterator[TextChunk]:
    """`text` in pieces of `size` characters, with their offsets and line numbers (from 1)."""
    start_byte, line = 0, 1
    for index, start in enumerate(range(0, len(text), size)):
        piece = text[start : start + size]
        newlines = piece.count("\n")
        end_line = line + newlines - (1 if piece.endswith("\n") else 0)
        yield TextChunk(index, piece, start, start_byte, line, end_line)
        start_byte += len(piece.encode("utf-8"))
        line += newlines


def line_count(text: str) -> int:
    """Lines end with a newline; a last piece without one counts too (so "" has 0 lines)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def iter_lines(chunks: Iterable[str], *, first_line: int, keep: int) -> Iterator[tuple[int, str, bool]]:
    """(number, text without its newline, cut) for each line of consecutive chunks.

    The first chunk starts on line `first_line`. At most `keep` characters of a line are kept
    (`cut` tells that more were dropped), so a huge line costs no memory.
    """
    lineno = first_line
    kept: list[str] = []
    kept_len = 0
    cut = False
    for chunk in chunks:
        pos = 0
        while True:
            newline = chunk.find("\n", pos)
            piece = chunk[pos:] if newline < 0 else chunk[pos:newline]
            if kept_len < keep:
                take = piece[: keep - kept_len]
                kept.append(take)
                kept_len += len(take)
                cut = cut or len(take) < len(piece)
            elif piece:
                cut = True
            if newline < 0:
                break
            yield lineno, "".join(kept), cut
            lineno, kept, kept_len, cut = lineno + 1, [], 0, False
            pos = newline + 1
    if kept_len or cut:
        yield lineno, "".join(kept), cut


# ---------------------------------------------------------------------------
# {{stepN.field}} references
# ---------------------------------------------------------------------------
REFERENCE_RE = re.compile(r"\{\{\s*step(\d+)\.([A-Za-z_][A-Za-z0-9_\-]*)\s*\}\}")


class FieldMissing(Exception):
    def __init__(self, available: list[str]) -> None:
        super().__init__("field missing")
        self.available = available


def references_in(value: Any) -> list[tuple[int, str]]:
    """Every (step, field) referenced in a tool input, in order of appearance, without repeats."""
    found: dict[tuple[int, str], None] = {}

    def walk(item: Any) -> None:
        if isinstance(item, str):
            for match in REFERENCE_RE.finditer(item):
                found.setdefault((int(match.group(1)), match.group(2)), None)
        elif isinstance(item, dict):
            for sub in item.values():
                walk(sub)
        elif isinstance(item, list):
            for sub in item:
                walk(sub)

    walk(value)
    return list(found)


def references_substitute(value: Any, lookup: Callable[[int, str], Any]) -> Any:
    """`value` with each reference replaced by `lookup(step, field)`.

    A string that is exactly one reference becomes the field's value as it is (any JSON type);
    a reference inside a longer string is replaced by the value's text (a string as is, anything
    else as compact JSON). Object keys are left alone.
    """
    if isinstance(value, str):
        whole = REFERENCE_RE.fullmatch(value)
        if whole:
            return lookup(int(whole.group(1)), whole.group(2))

        def text_of(match: re.Match[str]) -> str:
            found = lookup(int(match.group(1)), match.group(2))
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

        return REFERENCE_RE.sub(text_of, value)
    if isinstance(value, dict):
        return {k: references_substitute(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [references_substitute(v, lookup) for v in value]
    return value


def parts_field(parts: ResultParts, name: str) -> Any:
    """A field of a full result: `content` (text, or base64 of binary) or another field.

    Raises `FieldMissing` with the fields there are.
    """
    if name == "content":
        return base64.b64encode(parts.data).decode("ascii") if parts.is_binary else parts.text
    if parts.content_is_json:
        value = json.loads(parts.text)
        fields = list(value) if isinstance(value, dict) else []
        if name in fields:
            return value[name]
    else:
        fields = list(parts.metadata)
        if name in parts.metadata:
            return parts.metadata[name]
    raise FieldMissing(["content", *fields])
