"""An MCP tool's result as the model gets it: text as text, an image as an image block (base64
source), an embedded resource's text as text, anything else (a blob, audio, a link) as a short
note saying what it was. `isError` is a tool error with the server's text. What is kept is
bounded (`MCP_RESULT_MAX_BYTES`); a large result then goes through offload like any other."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from memory_app.mcp import prompts
from memory_app.mcp.limits import MCP_IMAGE_MAX_BYTES, MCP_IMAGE_TYPES, MCP_RESULT_MAX_BYTES
from sessions_app.common.content import text_clip_middle
from sessions_app.engine.contract import ToolError


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _block(item: Any) -> dict[str, Any]:
    if isinstance(item, types.TextContent):
        return _text_block(item.text)
    if isinstance(item, types.ImageContent):
        if item.mime_type in MCP_IMAGE_TYPES and len(item.data) <= MCP_IMAGE_MAX_BYTES:
            source = {"type": "base64", "media_type": item.mime_type, "data": item.data}
            return {"type": "image", "source": source}
        return _text_block(prompts.IMAGE_NOT_SHOWN.format(mime=item.mime_type, size=len(item.data)))
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            return _text_block(resource.text)
        return _text_block(
            prompts.BLOB_NOT_SHOWN.format(
                uri=resource.uri, mime=resource.mime_type or "binary", size=len(resource.blob)
            )
        )
    if isinstance(item, types.ResourceLink):
        return _text_block(prompts.RESOURCE_LINK.format(uri=item.uri, name=item.name))
    kind = getattr(item, "type", type(item).__name__)
    return _text_block(prompts.CONTENT_NOT_SHOWN.format(kind=kind))


def _bounded(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks with their texts cut (in the middle, with the omission marker) so that all of
    them hold at most `MCP_RESULT_MAX_BYTES` characters; images count their data."""
    total = sum(len(b.get("text", "")) + len(b.get("source", {}).get("data", "")) for b in blocks)
    if total <= MCP_RESULT_MAX_BYTES:
        return blocks
    room = MCP_RESULT_MAX_BYTES
    kept = []
    for block in blocks:
        if block["type"] == "image":
            size = len(block["source"]["data"])
            if size <= room:
                room -= size
                kept.append(block)
            else:
                kept.append(
                    _text_block(prompts.IMAGE_NOT_SHOWN.format(mime=block["source"]["media_type"], size=size))
                )
            continue
        text = block["text"]
        if len(text) > room:
            half = max(room // 2, 0)
            text = text_clip_middle(text, head=half, tail=half)
        room = max(room - len(text), 0)
        kept.append(_text_block(text))
    return kept


def call_result_content(result: types.CallToolResult) -> str | list[dict[str, Any]]:
    """The tool's result for the model: one text as a string, else content blocks. Raises
    `ToolError` with the server's text when the result is an error."""
    blocks = [_block(item) for item in result.content]
    if not blocks and result.structured_content is not None:
        blocks = [_text_block(json.dumps(result.structured_content, ensure_ascii=False))]
    blocks = _bounded(blocks)
    if result.is_error:
        text = "\n".join(b["text"] for b in blocks if b["type"] == "text").strip()
        raise ToolError(text or prompts.ERROR_WITHOUT_TEXT)
    if not blocks:
        return prompts.EMPTY_RESULT
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks
