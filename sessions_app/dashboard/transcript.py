"""The transcript as the dashboard shows it: stored messages and live events as the same items.

A page of stored messages (`items_from_messages`) and the events of a running turn
(`items_from_event`) become the same `TranscriptItem`s, rendered by one template partial, so a
transcript that was streamed in looks exactly like one loaded later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sessions_app.common.content import content_text
from sessions_app.engine.compaction.tiers import KIND_TURN, TRIGGER_OPERATOR
from sessions_app.engine.features import features
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING
from sessions_app.message_content import resolved
from sessions_app.models import Archive, Message

USER = "user"
ASSISTANT = "assistant"
TOOL_RESULT = "tool_result"
COMPACTION = "compaction"
WARNING = "warning"
ERROR = "error"
# A turn that ended other than by the model's own end (cancelled, max steps, error).
TURN_END = "turn_end"
# A sub-session started by one of the session's delegating calls (live, from `session.spawned`).
SPAWNED = "spawned"
# The child's id at the start of a delegating call's result (`{"session_id": ...}`).
_CHILD_ID_RE = re.compile(r'^\{"session_id": "([0-9a-f-]{36})"')


# How a tool's input or result is shown: a one-line summary of at most SUMMARY_CHARS; blocks
# longer than CLIP_LINES lines or CLIP_CHARS characters start clipped, with a "show all".
SUMMARY_CHARS = 90
CLIP_LINES = 14
CLIP_CHARS = 1200
# A string field of a JSON object this long, or with line breaks, is shown as its own block
# (a file's content, a program's output) rather than as one escaped JSON line.
FIELD_BLOCK_CHARS = 160
FIELD_SHOWN_BELOW = "(shown below)"


@dataclass(frozen=True)
class Block:
    """Text to show in a <pre>: its label (a field's name, or empty), whether it is code, and
    whether it is long enough to start clipped."""

    text: str
    label: str = ""
    code: bool = False

    @property
    def long(self) -> bool:
        return len(self.text) > CLIP_CHARS or self.text.count("\n") >= CLIP_LINES

    @property
    def size(self) -> str:
        lines = self.text.count("\n") + 1
        return f"{lines:,} lines" if lines > 1 else f"{len(self.text):,} characters"


NOTES_TARGET_PREFIX = "tool-notes-"
NOTEPAD_UPDATED = "notepad.updated"


def call_notes_target(tool_use_id: str) -> str:
    """The element id under which a call's notepad notes are listed (ids are model-made: any
    character outside a CSS identifier's plain set becomes `_`)."""
    return NOTES_TARGET_PREFIX + re.sub(r"[^A-Za-z0-9_-]", "_", tool_use_id)


def call_note_of(event: dict) -> tuple[str, str | None] | None:
    """A `notepad.updated` event made during a tool call: (the call's id, what it appended, or
    None when it rewrote the notepad); None for any other event."""
    if event.get("type") != NOTEPAD_UPDATED or not event.get("tool_use_id"):
        return None
    note = event.get("note")
    return str(event["tool_use_id"]), (str(note) if isinstance(note, str) else None)


def one_line(value: Any) -> str:
    """A value as one line of compact JSON (or the text itself), cut to SUMMARY_CHARS."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def readable_blocks(value: Any, *, code_field: str = "") -> list[Block]:
    """A JSON value as blocks to read: the value pretty-printed, with each long or multi-line
    string field of an object taken out as a block of its own (`code_field`'s marked as code)."""
    if isinstance(value, str):
        return [Block(value)] if value else []
    if not isinstance(value, dict):
        return [Block(json.dumps(value, ensure_ascii=False, indent=2))]
    shown: dict[str, Any] = {}
    fields: list[Block] = []
    for key, item in value.items():
        if isinstance(item, str) and (key == code_field or "\n" in item or len(item) > FIELD_BLOCK_CHARS):
            shown[key] = FIELD_SHOWN_BELOW
            fields.append(Block(item, label=str(key), code=key == code_field))
        else:
            shown[key] = item
    # The object itself is shown only where something is left in it besides what moved out.
    rest = fields and all(item == FIELD_SHOWN_BELOW for item in shown.values())
    head = [] if rest else [Block(json.dumps(shown, ensure_ascii=False, indent=2))]
    return head + fields


def result_value(text: str) -> Any:
    """A tool result's text as JSON when it is JSON (most results are), else the text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input_json: str
    # The input's `code` (run_sandbox_code), shown as code.
    code: str = ""
    # The sub-session a delegating call started (filled in by `transcript_link_children`).
    child_id: str = ""
    # The input as blocks to read (pretty JSON, long fields apart, code as code).
    blocks: tuple[Block, ...] = ()
    summary: str = ""
    # The notepad edits made during the call, in order (an authored tool's progress notes: what
    # each appended, or None for an edit that rewrote the notepad), filled in by
    # `transcript_call_notes`; live ones are appended under `notes_target`.
    notes: tuple[str | None, ...] = ()

    @property
    def notes_target(self) -> str:
        return call_notes_target(self.id)


@dataclass(frozen=True)
class TranscriptItem:
    kind: str
    # Unique on the page: `m<position>-<n>` for stored messages, `e<seq>` for live events.
    key: str
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    # tool_result: the tool's name and whether it failed.
    name: str = ""
    is_error: bool = False
    # compaction: the archive it made, and the epoch it started.
    archive_id: str = ""
    epoch: int | None = None
    # The stored message's position (None for items made from events).
    position: int | None = None
    # compaction: its receipt in one line (trigger, kept, masked, duration, tokens).
    receipt: str = ""
    # spawned, and a delegating call's tool_result: the sub-session it concerns.
    child_id: str = ""
    # tool_result of run_sandbox_code: {exit_code, stdout, stderr, timed_out, duration_ms}.
    run: dict[str, Any] | None = None

    @property
    def result_blocks(self) -> list[Block]:
        """A tool result as blocks to read."""
        return readable_blocks(result_value(self.text))

    @property
    def summary(self) -> str:
        return one_line(result_value(self.text))


SANDBOX_TOOL = "run_sandbox_code"


def sandbox_run_of(name: str, text: str) -> dict[str, Any] | None:
    """A sandbox call's result as fields to show (None for any other result, or an offloaded one)."""
    if name != SANDBOX_TOOL:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and {"exit_code", "stdout", "stderr", "duration_ms"} <= set(value):
        return value
    return None


def compaction_receipt(
    *,
    trigger: str,
    kept: int,
    masked: int,
    duration_ms: int,
    tokens_before: int,
    tokens_after: int,
    kind: str = "",
) -> str:
    parts = [trigger or "threshold"]
    if kind == KIND_TURN:
        # A long turn's own older steps were summarized: its request and newest steps were kept.
        parts.append(
            f"the running turn's older steps summarized, {kept} message{'s' if kept != 1 else ''} kept"
        )
    # An operator's compaction runs between turns: there is no running turn to keep.
    elif trigger != TRIGGER_OPERATOR:
        parts.append(f"{kept} message{'s' if kept != 1 else ''} of the running turn kept verbatim")
    if masked:
        parts.append(f"{masked} tool result{'s' if masked != 1 else ''} masked")
    parts.append(f"{duration_ms / 1000:.1f} s")
    parts.append(f"{tokens_before:,} → {tokens_after:,} tokens")
    return " · ".join(parts)


def result_text(content: Any) -> str:
    """A tool result's content (a string or content blocks) as the transcript shows it."""
    return content_text(content, sep="\n", mark_other_blocks=True)


def _tool_use(block: dict) -> ToolUse:
    tool_input = block.get("input", {})
    code = tool_input.get("code") if isinstance(tool_input, dict) else None
    return ToolUse(
        id=str(block.get("id", "")),
        name=str(block.get("name", "")),
        input_json=json.dumps(tool_input, ensure_ascii=False, indent=2),
        code=code if isinstance(code, str) else "",
        blocks=tuple(readable_blocks(tool_input, code_field="code" if isinstance(code, str) else "")),
        summary=one_line(tool_input),
    )


def _tool_uses(blocks: Iterable[Any]) -> list[ToolUse]:
    return [_tool_use(b) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]


def child_of_result(name: str, text: str) -> str:
    """The sub-session a delegating call's result names (`FeatureDashboard.delegating_tools`;
    "" for any other result)."""
    if name not in features().delegating_tools:
        return ""
    match = _CHILD_ID_RE.match(text)
    return match.group(1) if match else ""


def _texts(blocks: list[Any]) -> str:
    return content_text(blocks, sep="\n\n")


def tool_use_ids(messages: Iterable[Message]) -> set[str]:
    """The ids of the tool calls whose results these messages hold (to look their names up)."""
    return {
        str(b.get("tool_use_id"))
        for m in messages
        for b in resolved(m)
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }


def items_from_message(
    message: Message, *, tool_names: dict[str, str], summaries: dict[str, Archive]
) -> list[TranscriptItem]:
    """`tool_names`: tool_use id → name; `summaries`: archive id → the archive (its summary and
    receipt)."""
    content = resolved(message)
    blocks = content if isinstance(content, list) else []
    kind = (message.metadata or {}).get("type")
    key = f"m{message.position}"
    if kind == "carried" or (kind == "compact" and "from_position" in message.metadata):
        # A copy of the running turn's message at a compaction (or of the epoch's summary, at a
        # compaction of the turn's steps): the original is shown already.
        return []
    if kind in ("compact", "turn_summary"):
        archive_id = str(message.metadata.get("previous_archive", ""))
        archive = summaries.get(archive_id)
        return [
            TranscriptItem(
                COMPACTION,
                key,
                text=archive.summary if archive is not None else _texts(blocks),
                archive_id=archive_id,
                epoch=message.epoch,
                position=message.position,
                receipt=compaction_receipt(
                    trigger=archive.trigger,
                    kept=archive.kept_messages,
                    masked=len(archive.masked or []),
                    duration_ms=archive.duration_ms,
                    tokens_before=archive.tokens_before,
                    tokens_after=archive.tokens_after,
                    kind=archive.kind,
                )
                if archive is not None
                else "",
            )
        ]
    if kind == "compaction_warning":
        return [TranscriptItem(WARNING, key, text=_texts(blocks), position=message.position)]
    if message.role == ASSISTANT:
        return [
            TranscriptItem(
                ASSISTANT, key, text=_texts(blocks), tool_uses=_tool_uses(blocks), position=message.position
            )
        ]
    items = []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            tool_use_id = str(block.get("tool_use_id", ""))
            name = tool_names.get(tool_use_id, "tool")
            text = result_text(block.get("content"))
            items.append(
                TranscriptItem(
                    TOOL_RESULT,
                    f"{key}-{index}",
                    text=text,
                    name=name,
                    is_error=bool(block.get("is_error")),
                    position=message.position,
                    run=sandbox_run_of(name, text),
                    child_id=child_of_result(name, text),
                )
            )
        elif block.get("type") == "text":
            items.append(
                TranscriptItem(
                    USER, f"{key}-{index}", text=str(block.get("text", "")), position=message.position
                )
            )
    return items


def items_from_messages(
    messages: Iterable[Message], *, tool_names: dict[str, str], summaries: dict[str, Archive]
) -> list[TranscriptItem]:
    return [
        item for m in messages for item in items_from_message(m, tool_names=tool_names, summaries=summaries)
    ]


def archive_ids(messages: Iterable[Message]) -> set[str]:
    """The archives whose summaries start an epoch among these messages."""
    return {
        str(m.metadata["previous_archive"])
        for m in messages
        if (m.metadata or {}).get("type") in ("compact", "turn_summary")
        and m.metadata.get("previous_archive")
    }


def items_from_event(event: dict) -> list[TranscriptItem]:
    """The transcript items a live event adds (none for deltas, usage, memory edits, ...)."""
    kind, key = event["type"], f"e{event['seq']}"
    if kind == "user.message":
        return [TranscriptItem(USER, key, text=str(event.get("content", "")))]
    if kind == "assistant.message":
        blocks = event.get("content") or []
        return [TranscriptItem(ASSISTANT, key, text=_texts(blocks), tool_uses=_tool_uses(blocks))]
    if kind == "tool.result":
        name, text = str(event.get("name", "tool")), result_text(event.get("content"))
        return [
            TranscriptItem(
                TOOL_RESULT,
                key,
                text=text,
                name=name,
                is_error=bool(event.get("is_error")),
                run=sandbox_run_of(name, text),
                child_id=child_of_result(name, text),
            )
        ]
    if kind == "session.spawned":
        return [
            TranscriptItem(
                SPAWNED,
                key,
                text=str(event.get("title", "")),
                name=str(event.get("mode", "")),
                child_id=str(event.get("child_session_id", "")),
            )
        ]
    if kind == "compaction.warning":
        return [
            TranscriptItem(
                WARNING,
                key,
                text=PRE_COMPACTION_WARNING,
            )
        ]
    if kind == "compaction.completed":
        return [
            TranscriptItem(
                COMPACTION,
                key,
                text=str(event.get("summary", "")),
                archive_id=str(event.get("archive_id", "")),
                epoch=event.get("epoch"),
                receipt=compaction_receipt(
                    trigger=str(event.get("trigger", "")),
                    kept=int(event.get("kept_messages", 0)),
                    masked=len(event.get("masked") or []),
                    duration_ms=int(event.get("duration_ms", 0)),
                    tokens_before=int(event.get("tokens_before", 0)),
                    tokens_after=int(event.get("tokens_after", 0)),
                    kind=str(event.get("kind", "")),
                ),
            )
        ]
    if kind == "error":
        return [TranscriptItem(ERROR, key, text=f"{event.get('code')}: {event.get('message')}")]
    if kind == "turn.completed" and event.get("stop_reason") not in (None, "end_turn"):
        return [TranscriptItem(TURN_END, key, text=str(event.get("stop_reason")))]
    return []
