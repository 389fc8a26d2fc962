"""Typed server events (PROTOCOL.md's "Server → client events" and the README's additions).

Every event carries `type`, `session_id`, `seq` (per session, gapless from 1) and `ts`; `raw` is
the frame as received, so fields the server adds later are never lost. A type this module does
not know is an `Event` with just those.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    """A stored session event. `session_id` names the session it belongs to: the attached
    session or one of its sub-sessions (PROTOCOL.md v1.1)."""

    TYPE: ClassVar[str] = ""
    type: str
    session_id: str
    seq: int
    ts: str
    raw: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class UserMessage(Event):
    TYPE: ClassVar[str] = "user.message"
    turn_id: str = ""
    content: str = ""


@dataclass(frozen=True)
class TurnStarted(Event):
    TYPE: ClassVar[str] = "turn.started"
    turn_id: str = ""
    request_id: str | None = None


@dataclass(frozen=True)
class AssistantDelta(Event):
    TYPE: ClassVar[str] = "assistant.delta"
    text: str = ""


@dataclass(frozen=True)
class AssistantMessage(Event):
    TYPE: ClassVar[str] = "assistant.message"
    content: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The message's text blocks, joined."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


@dataclass(frozen=True)
class ToolCall(Event):
    TYPE: ClassVar[str] = "tool.call"
    tool_use_id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    executor: str = "server"


@dataclass(frozen=True)
class ToolResult(Event):
    TYPE: ClassVar[str] = "tool.result"
    tool_use_id: str = ""
    name: str = ""
    is_error: bool = False
    content: Any = None
    observation_id: str | None = None


@dataclass(frozen=True)
class ApprovalAnswered(Event):
    """A call that waited for an approval was answered (docs/clients.md): by whom, and how."""

    TYPE: ClassVar[str] = "tool.approval_answered"
    tool_use_id: str = ""
    name: str = ""
    approved: bool = False
    author: str = ""
    reason: str | None = None


@dataclass(frozen=True)
class NotepadUpdated(Event):
    TYPE: ClassVar[str] = "notepad.updated"
    content: str = ""
    version: int = 0
    author: str = ""
    # An edit made while an agent's authored tool ran (its progress notes): the call, and the
    # text the edit added at the end, when it did.
    tool_use_id: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class ScratchpadUpdated(Event):
    TYPE: ClassVar[str] = "scratchpad.updated"
    space: str = ""
    value: Any = None
    author: str = ""
    version: int | None = None


@dataclass(frozen=True)
class CompactionWarning(Event):
    TYPE: ClassVar[str] = "compaction.warning"
    estimated_tokens: int = 0
    threshold_tokens: int = 0


@dataclass(frozen=True)
class CompactionCompleted(Event):
    TYPE: ClassVar[str] = "compaction.completed"
    archive_id: str = ""
    epoch: int = 0
    summary: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    trigger: str | None = None
    # What was summarized (an addition): "history" (before the running turn) or "turn" (the
    # running turn's own older steps; its request and newest steps were kept verbatim).
    kind: str | None = None


@dataclass(frozen=True)
class CompactionMasked(Event):
    """Compaction's cheap tier masked old tool results (no summary). `masked` lists them, each
    `{tool_use_id, observation_id, size_chars, tokens_saved}`: the observation keeps it whole."""

    TYPE: ClassVar[str] = "compaction.masked"
    masked: list[dict[str, Any]] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(frozen=True)
class CompactionFailed(Event):
    TYPE: ClassVar[str] = "compaction.failed"
    message: str = ""
    failures_in_a_row: int = 0


@dataclass(frozen=True)
class Usage(Event):
    TYPE: ClassVar[str] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    estimated_next_prompt_tokens: int = 0


@dataclass(frozen=True)
class TurnCompleted(Event):
    TYPE: ClassVar[str] = "turn.completed"
    turn_id: str = ""
    stop_reason: str = ""


@dataclass(frozen=True)
class ErrorEvent(Event):
    """A stored `error` event of a turn (`model_error`, `internal_error`, ...): the turn then ends
    with `turn.completed` and `stop_reason: "error"`. (An error answering one of the client's
    frames has no `seq` and is raised as a `ProtocolError` instead.)"""

    TYPE: ClassVar[str] = "error"
    code: str = ""
    message: str = ""


@dataclass(frozen=True)
class SessionSpawned(Event):
    TYPE: ClassVar[str] = "session.spawned"
    child_session_id: str = ""
    mode: str = ""
    tool_use_id: str = ""
    title: str = ""


@dataclass(frozen=True)
class SessionStatus(Event):
    TYPE: ClassVar[str] = "session.status"
    status: str = ""


@dataclass(frozen=True)
class TaskStarted(Event):
    TYPE: ClassVar[str] = "task.started"
    task_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class TaskEnded(Event):
    TYPE: ClassVar[str] = "task.ended"
    task_id: str = ""
    name: str = ""
    summary: str = ""
    collapsed_messages: int = 0


@dataclass(frozen=True)
class ApprovalRequested(Event):
    """PROTOCOL.md v1.2: a server tool call waits for the owner's `tool.approve` / `tool.deny`."""

    TYPE: ClassVar[str] = "tool.approval_requested"
    tool_use_id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    # The digest of `input` (docs/clients.md): an answer that carries it holds for that input only.
    input_sha256: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        UserMessage,
        TurnStarted,
        AssistantDelta,
        AssistantMessage,
        ToolCall,
        ToolResult,
        NotepadUpdated,
        ScratchpadUpdated,
        CompactionWarning,
        CompactionCompleted,
        CompactionMasked,
        CompactionFailed,
        Usage,
        TurnCompleted,
        ErrorEvent,
        SessionSpawned,
        SessionStatus,
        TaskStarted,
        TaskEnded,
        ApprovalRequested,
        ApprovalAnswered,
    )
}
_BASE_FIELDS = frozenset(f.name for f in dataclasses.fields(Event))


def is_event(frame: dict[str, Any]) -> bool:
    """Whether a frame is a stored session event (it has a `seq`), not a reply."""
    return isinstance(frame.get("seq"), int) and isinstance(frame.get("session_id"), str)


def event_from_frame(frame: dict[str, Any]) -> Event:
    """The typed event of a frame for which `is_event` holds. Fields missing from the frame keep
    their defaults; fields this module does not know stay in `raw`."""
    cls = EVENT_TYPES.get(str(frame.get("type")), Event)
    extra = {
        f.name: frame[f.name]
        for f in dataclasses.fields(cls)
        if f.name not in _BASE_FIELDS and f.name in frame and frame[f.name] is not None
    }
    return cls(
        type=str(frame.get("type")),
        session_id=frame["session_id"],
        seq=frame["seq"],
        ts=str(frame.get("ts", "")),
        raw=frame,
        **extra,
    )
