"""Where a model call stopped sharing the previous call's prefix, and why (the prompt inspector).

The prompt cache reads a request's longest prefix that an earlier request wrote: everything
after the first block that differs from the previous request is written again (or sent
uncached). `prefix_break` compares a call with the session's previous call of the same purpose
(a separate summary call's request is unlike a turn's; the cache keeps both; a summary call in
the session's layout is compared with the turn's call before it) in prefix order, tools,
system blocks, then messages block by block (`cache_control` aside: moving a breakpoint changes
no content), and names the first point that differs and why:

- `tools`: the tool list changed (a tool added, removed or redefined);
- `system`: the stable system prompt changed; `memory` when the changed block is a per-call
  section (after the system prompt's first cache breakpoint, or the `## Session Notepad`);
- `compaction`: an archive was made between the two calls (the epoch changed), or the call is a
  summary call in the session's layout, which parts from the turn's request at its question;
- `masking`: a tool result became its placeholder (the session's `MaskedResult` rows);
- `task`: a tool call of the previous request is gone from this one (a finished task's calls
  collapsed into its record);
- `memory`: a per-call block of the previous request (notepad, scratchpad, a hint put into its
  latest user message for that call only) is not in this one;
- `history`: anything else.

It works from the stored records: runs of stored messages are named by position, so two runs
at the same place are equal without reading them, and only messages sent changed on one side
are read. Bounded by the request (at most six queries), not by the session.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from sessions_app.common.estimate import estimate_json_tokens, estimate_text_tokens
from sessions_app.common.request_record import MESSAGE_KEY, RUN_KEY, message_rebuilt, recorded_positions
from sessions_app.message_content import RESOLVED, messages_with_content
from sessions_app.models import Archive, MaskedResult, Message, ModelCall, RequestPart

# A system block that is the notepad's section is memory wherever it sits.
NOTEPAD_SECTION_HEADING = "## Session Notepad"
# How much of a block's first line a reason's detail quotes.
DETAIL_QUOTE_CHARS = 60

REASONS = ("tools", "system", "memory", "masking", "compaction", "task", "history")


@dataclass(frozen=True)
class PrefixBreak:
    """The first point of a request that differs from the previous one's (`where`: `tools`,
    `system` or `messages`, `index` in that list, `block` within a message), or where the
    previous request ended when this one only extends it (`reason` empty)."""

    previous_id: int
    where: str
    index: int
    block: int
    reason: str  # one of REASONS; "" when the previous request is a prefix of this one
    detail: str
    shared_blocks: int  # blocks of this request before the point
    total_blocks: int
    # This request's tokens after the point: the local estimate, scaled to the provider's
    # count when the call reported usage.
    tokens_after: int

    @property
    def location(self) -> str:
        return f"{self.where}[{self.index}]"


@dataclass
class _Slot:
    """A message of a request as its record names it: a stored position sent unchanged, a stored
    message sent with blocks added or marked (`changed`, its record item), or a literal message."""

    position: int | None
    message: dict | None
    changed: dict | None = None


def _slots(record_messages: Iterable[Any]) -> list[_Slot]:
    slots: list[_Slot] = []
    for item in record_messages:
        if isinstance(item, dict) and RUN_KEY in item:
            slots += [_Slot(p, None) for p in recorded_positions(item)]
        elif isinstance(item, dict) and type(item.get(MESSAGE_KEY)) is int:
            slots.append(_Slot(None, None, item))
        else:
            slots.append(_Slot(None, item if isinstance(item, dict) else {"content": item}))
    return slots


def _stripped(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _blocks(content: Any) -> list:
    if isinstance(content, list):
        return [_stripped(b) for b in content]
    return [{"type": "text", "text": content}] if isinstance(content, str) else [content]


def _first_difference(old: list, new: list) -> int | None:
    """The first index where two lists differ (the shorter's length when one extends the
    other), None when they are equal."""
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return index
    return None if len(old) == len(new) else min(len(old), len(new))


def _quote(block: Any) -> str:
    text = block.get("text", "") if isinstance(block, dict) else str(block)
    line = str(text).strip().split("\n", 1)[0]
    return line if len(line) <= DETAIL_QUOTE_CHARS else line[: DETAIL_QUOTE_CHARS - 1] + "…"


def _tool_list(record: dict, fallback: list | None) -> list | None:
    """The tools of a record: as sent, or its stored part; None when the part is gone."""
    value = record.get("tools", [])
    if isinstance(value, dict) and set(value) == {"$part"}:
        if fallback is not None:
            return fallback
        text = RequestPart.objects.filter(pk=value["$part"]).values_list("text", flat=True).first()
        return json.loads(text) if text is not None else None
    return value if isinstance(value, list) else []


def _system(value: Any) -> list:
    return _blocks(value) if value else []


def _tool_ids(messages: Iterable[dict]) -> set[str]:
    ids: set[str] = set()
    for message in messages:
        for block in message.get("content") or []:
            if isinstance(block, dict):
                ids.add(str(block.get("id") or block.get("tool_use_id") or ""))
    return ids


def previous_call(*, call: ModelCall) -> ModelCall | None:
    """The session's call of the same purpose before `call` (its request record only); for a
    summary call in the session's layout (it offers the session's tools), the turn's call before
    it, whose prefix it shares."""
    record = call.request if isinstance(call.request, dict) else {}
    purpose = "turn" if call.purpose == "summary" and record.get("tools") else call.purpose
    earlier = ModelCall.objects.filter(session_id=call.session_id, purpose=purpose).filter(
        Q(started_at__lt=call.started_at) | Q(started_at=call.started_at, pk__lt=call.pk)
    )
    return earlier.order_by("-started_at", "-pk").only("pk", "request", "started_at").first()


def prefix_break(*, call: ModelCall, body: dict[str, Any]) -> PrefixBreak | None:
    """Where `call` (its rebuilt `body`: `selectors.model_call_request`) stopped sharing the
    previous call's prefix, and why; None for the session's first call of its purpose."""
    previous = previous_call(call=call)
    if previous is None:
        return None
    return _Comparison(call, body, previous).result()


class _Comparison:
    def __init__(self, call: ModelCall, body: dict[str, Any], previous: ModelCall) -> None:
        self.call, self.body, self.previous = call, body, previous
        self.record = call.request if isinstance(call.request, dict) else {}
        self.old_record = previous.request if isinstance(previous.request, dict) else {}
        self.tools = [_stripped(t) for t in body.get("tools", [])]
        self.system = _system(body.get("system"))
        self.messages: list[dict] = body.get("messages", [])
        self.slots = _slots(self.record.get("messages", []))
        if len(self.slots) != len(self.messages):  # a record that does not name this body
            self.slots = [_Slot(None, m) for m in self.messages]
        self._archive_read = False
        self._archive: Archive | None = None

    # -- the point --------------------------------------------------------------------------
    def result(self) -> PrefixBreak:
        same_part = self.old_record.get("tools") == self.record.get("tools")
        old_tools = _tool_list(self.old_record, self.tools if same_part else None)
        if old_tools is None:
            return self._made("tools", 0, 0, "tools", "the previous request's tool list is not stored")
        old_tools = [_stripped(t) for t in old_tools]
        at = _first_difference(old_tools, self.tools)
        if at is not None:
            return self._made("tools", at, 0, "tools", self._tools_detail(old_tools))
        old_system = _system(self.old_record.get("system"))
        at = _first_difference(old_system, self.system)
        if at is not None:
            return self._system_break(at, old_system)
        return self._messages_break()

    def _system_break(self, at: int, old_system: list) -> PrefixBreak:
        archive = self.archive_between()
        if archive is not None:
            return self._made("system", at, 0, "compaction", self._compaction_detail(archive))
        block = self.system[at] if at < len(self.system) else old_system[at]
        raw = self.body.get("system")
        cached_at = (
            next(
                (i for i, b in enumerate(raw) if isinstance(b, dict) and "cache_control" in b),
                None,
            )
            if isinstance(raw, list)
            else None
        )
        per_call = cached_at is not None and at > cached_at
        if per_call or _quote(block).startswith(NOTEPAD_SECTION_HEADING):
            return self._made("system", at, 0, "memory", f"per-call section changed: {_quote(block)}")
        return self._made("system", at, 0, "system", "the system prompt changed")

    def _messages_break(self) -> PrefixBreak:
        old_slots = _slots(self.old_record.get("messages", []))
        common = min(len(old_slots), len(self.slots))
        # The stored messages whose content a comparison needs (one query): the previous
        # request's stored messages where this one sent a message changed, up to the first
        # place where two runs name different positions.
        needed: list[int] = [s.changed[MESSAGE_KEY] for s in old_slots[:common] if s.changed is not None]
        for old, new in zip(old_slots[:common], self.slots[:common], strict=True):
            if old.position is not None and (new.position is None or new.position != old.position):
                needed.append(old.position)
                if new.position is not None:
                    break
        # Their content as every reader sees it (a fork's copy shares its parent's).
        stored = {
            m.position: {"role": m.role, "content": getattr(m, RESOLVED)}
            for m in messages_with_content(
                Message.objects.filter(session_id=self.call.session_id, position__in=needed).only(
                    "position", "role"
                )
            )
        }
        for index in range(common):
            old, new = old_slots[index], self.slots[index]
            if old.position is not None and old.position == new.position:
                continue
            old_message = old.message if old.position is None else stored.get(old.position)
            if old.changed is not None:
                named = stored.get(old.changed[MESSAGE_KEY])
                old_message = (
                    None if named is None else message_rebuilt(old.changed, named["role"], named["content"])
                )
            if old_message is None:  # the stored message is gone: nothing to compare with
                return self._message_reason(index, 0, None, old_slots)
            new_message = self.messages[index]
            if old_message.get("role") != new_message.get("role"):
                return self._message_reason(index, 0, old_message, old_slots)
            old_blocks = _blocks(old_message.get("content"))
            block = _first_difference(old_blocks, _blocks(new_message.get("content")))
            if block is None:
                continue
            if block >= len(old_blocks) and index == len(old_slots) - 1:
                return self._made("messages", index, block, "", "")  # this call only added to it
            return self._message_reason(index, block, old_message, old_slots)
        if len(old_slots) > len(self.slots):
            return self._message_reason(common, 0, None, old_slots)
        return self._made("messages", common, 0, "", "")

    # -- the reason -------------------------------------------------------------------------
    def _message_reason(
        self, index: int, block: int, old_message: dict | None, old_slots: list[_Slot]
    ) -> PrefixBreak:
        if self.call.purpose == "summary" and self.record.get("tools"):
            # A summary call in the session's layout: the history it summarizes, then its question.
            detail = "the summary call's question, where the running turn began in the turn's request"
            return self._made("messages", index, block, "compaction", detail)
        archive = self.archive_between()
        if archive is not None or (index == 0 and self._starts_with_summary()):
            return self._made("messages", index, block, "compaction", self._compaction_detail(archive))
        old_blocks = _blocks(old_message.get("content")) if old_message else []
        new_blocks = _blocks(self.messages[index].get("content")) if index < len(self.messages) else []
        old = old_blocks[block] if block < len(old_blocks) else None
        new = new_blocks[block] if block < len(new_blocks) else None
        if not isinstance(old, dict):
            return self._made("messages", index, block, "history", "the history differs")
        kind = old.get("type")
        tool_use_id = str(old.get("id") or old.get("tool_use_id") or "")
        if (
            kind == "tool_result"
            and isinstance(new, dict)
            and new.get("type") == "tool_result"
            and str(new.get("tool_use_id")) == tool_use_id
            and self._masked(tool_use_id)
        ):
            return self._made("messages", index, block, "masking", f"tool result {tool_use_id} masked")
        if kind in ("tool_use", "tool_result"):
            gone = self._tool_calls_gone(index, old_slots)
            if gone:
                calls = f"{gone} tool call{'s' if gone > 1 else ''}"
                detail = f"a finished task collapsed: {calls} of the previous request gone"
                return self._made("messages", index, block, "task", detail)
        # A block of a message the previous request changed for that call only, gone now.
        per_call = index < len(old_slots) and old_slots[index].position is None
        if kind == "text" and per_call and old not in new_blocks:
            detail = f"per-call block of the previous request: {_quote(old)}"
            return self._made("messages", index, block, "memory", detail)
        return self._made("messages", index, block, "history", "the history differs")

    def archive_between(self) -> Archive | None:
        if not self._archive_read:
            self._archive_read = True
            self._archive = (
                Archive.objects.filter(
                    session_id=self.call.session_id,
                    created_at__gt=self.previous.started_at,
                    created_at__lte=self.call.started_at,
                )
                .order_by("-epoch")
                .only("epoch", "trigger")
                .first()
            )
        return self._archive

    def _starts_with_summary(self) -> bool:
        first = self.slots[0].position if self.slots else None
        if first is None:
            return False
        metadata = (
            Message.objects.filter(session_id=self.call.session_id, position=first)
            .values_list("metadata", flat=True)
            .first()
        )
        return isinstance(metadata, dict) and metadata.get("type") == "compact"

    def _tool_calls_gone(self, index: int, old_slots: list[_Slot]) -> int:
        """How many tool calls of the previous request, from its message `index` on, this
        request no longer has (a finished task's calls are collapsed into its record; a masked
        result keeps its call). Reads the previous request's stored messages from there."""
        literal = [s.message for s in old_slots[index:] if s.message is not None]
        positions = [s.position for s in old_slots[index:] if s.position is not None]
        stored = (
            Message.objects.filter(
                session_id=self.call.session_id, position__gte=min(positions), position__lte=max(positions)
            ).values_list("position", "content")
            if positions
            else []
        )
        wanted = set(positions)
        old_messages = literal + [{"content": c} for p, c in stored if p in wanted]
        return len(_tool_ids(old_messages) - _tool_ids(self.messages) - {""})

    def _masked(self, tool_use_id: str) -> bool:
        return MaskedResult.objects.filter(session_id=self.call.session_id, tool_use_id=tool_use_id).exists()

    def _tools_detail(self, old_tools: list) -> str:
        old_names = [str(t.get("name")) for t in old_tools if isinstance(t, dict)]
        new_names = [str(t.get("name")) for t in self.tools if isinstance(t, dict)]
        added = [n for n in new_names if n not in old_names]
        removed = [n for n in old_names if n not in new_names]
        parts = [f"added {', '.join(added)}"] if added else []
        parts += [f"removed {', '.join(removed)}"] if removed else []
        if not parts:
            parts = ["a tool's definition or the order changed"]
        if self.archive_between() is not None:
            parts.append("after a compaction")
        return "; ".join(parts)

    @staticmethod
    def _compaction_detail(archive: Archive | None) -> str:
        if archive is None:
            return "the history starts with a summary"
        return f"epoch {archive.epoch} was archived before this call"

    # -- the cost ---------------------------------------------------------------------------
    def _made(self, where: str, index: int, block: int, reason: str, detail: str) -> PrefixBreak:
        blocks = [len(_blocks(m.get("content"))) for m in self.messages]
        total = len(self.tools) + len(self.system) + sum(blocks)
        if where == "tools":
            shared = index
        elif where == "system":
            shared = len(self.tools) + index
        else:
            shared = len(self.tools) + len(self.system) + sum(blocks[:index]) + block
        return PrefixBreak(
            previous_id=self.previous.pk,
            where=where,
            index=index,
            block=block,
            reason=reason,
            detail=detail,
            shared_blocks=min(shared, total),
            total_blocks=total,
            tokens_after=self._tokens_after(where, index, block),
        )

    def _tokens_after(self, where: str, index: int, block: int) -> int:
        """The estimated tokens of this request after the point, scaled to the provider's count."""
        estimate = 0
        first_message = 0
        if where == "tools":
            estimate += sum(estimate_json_tokens(t) for t in self.tools[index:])
        if where in ("tools", "system"):
            start = index if where == "system" else 0
            estimate += sum(estimate_text_tokens(str(b.get("text", ""))) for b in self.system[start:])
        else:
            if index < len(self.messages):
                estimate += estimate_json_tokens(_blocks(self.messages[index].get("content"))[block:])
            first_message = index + 1
        estimate += self._messages_tokens(first_message)
        estimated_total, reported = self.call.estimated_prompt_tokens, self.call.prompt_tokens
        if not (estimated_total and reported):
            return estimate
        return min(reported, round(reported * estimate / estimated_total))

    def _messages_tokens(self, start: int) -> int:
        """The estimated tokens of this request's messages from `start` on: the stored estimate
        of each stored message (one query), an estimate of each changed one."""
        positions = {s.position for s in self.slots[start:] if s.position is not None}
        total = sum(
            estimate_json_tokens(self.messages[i].get("content"))
            for i in range(start, len(self.slots))
            if self.slots[i].position is None
        )
        if positions:
            rows = Message.objects.filter(
                session_id=self.call.session_id,
                position__gte=min(positions),
                position__lte=max(positions),
            ).values_list("position", "token_estimate")
            total += sum(estimate for position, estimate in rows if position in positions)
        return total
