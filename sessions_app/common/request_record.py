"""How a recorded request names the stored messages it sent (`ModelCall.request`), and how such a
record is read back.

A request's messages are recorded as sent, except:
- a run of stored messages sent unchanged: `{"$messages": [first, last]}` (their positions);
- one stored message sent with blocks added for the call (a cache breakpoint on one of its blocks,
  the scratchpad block, a notepad copy anchored there), its stored blocks kept in order:
  `{"$message": position, "$content": [...]}`, where each item is a stored block's index, the same
  with the breakpoint it carried (`{"$block": index, "cache_control": {...}}`), or a block added
  for the call, as sent. So a message that holds a large tool result is not recorded again with
  every call that marks it or shows something with it.
"""

from __future__ import annotations

from typing import Any

RUN_KEY = "$messages"
MESSAGE_KEY = "$message"
CONTENT_KEY = "$content"
BLOCK_KEY = "$block"
CACHE_CONTROL = "cache_control"


def message_described(sent: dict, stored: dict, position: int) -> dict:
    """`sent` (a message of a request) as its record names it: by `position` and its changes when
    it is `stored` (the stored message as requests show it) with blocks added or marked, else as
    sent."""
    blocks = sent.get("content")
    stored_blocks = stored.get("content")
    if sent.get("role") != stored.get("role"):
        return sent
    if not isinstance(blocks, list) or not isinstance(stored_blocks, list):
        return sent
    described: list[Any] = []
    at = 0
    for block in blocks:
        if at < len(stored_blocks) and _same_block(block, stored_blocks[at]):
            mark = block.get(CACHE_CONTROL)
            described.append(at if mark is None else {BLOCK_KEY: at, CACHE_CONTROL: mark})
            at += 1
        elif isinstance(block, dict) and BLOCK_KEY not in block:
            described.append(block)
        else:
            return sent
    if at != len(stored_blocks):
        return sent
    return {MESSAGE_KEY: position, CONTENT_KEY: described}


def _same_block(block: Any, stored: Any) -> bool:
    if block is stored:
        return True
    if not isinstance(block, dict) or not isinstance(stored, dict):
        return False
    if CACHE_CONTROL in block and CACHE_CONTROL not in stored:
        return len(block) == len(stored) + 1 and all(block.get(k, _MISSING) == v for k, v in stored.items())
    return block == stored


_MISSING = object()


def recorded_positions(item: Any) -> list[int]:
    """The stored positions a record's message item names (none for a message recorded as sent)."""
    if isinstance(item, dict) and RUN_KEY in item:
        first, last = item[RUN_KEY]
        return list(range(first, last + 1))
    if isinstance(item, dict) and type(item.get(MESSAGE_KEY)) is int:
        return [item[MESSAGE_KEY]]
    return []


def message_rebuilt(item: dict, role: str, content: Any) -> dict | None:
    """The message a `$message` item names, given its stored message's `role` and `content`; None
    when the item does not fit that content (a record from an edited export, a message changed
    since)."""
    parts = item.get(CONTENT_KEY)
    if not isinstance(parts, list) or not isinstance(content, list):
        return None
    blocks: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and BLOCK_KEY not in part:
            blocks.append(part)  # a block added for the call, as sent
            continue
        index = part.get(BLOCK_KEY) if isinstance(part, dict) else part
        if type(index) is not int or not 0 <= index < len(content) or not isinstance(content[index], dict):
            return None
        marked = isinstance(part, dict)
        blocks.append({**content[index], CACHE_CONTROL: part[CACHE_CONTROL]} if marked else content[index])
    return {"role": role, "content": blocks}
