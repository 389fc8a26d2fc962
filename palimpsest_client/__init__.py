"""A Python client for Palimpsest's agent websocket (PROTOCOL.md), and a terminal chat on it.

    from palimpsest_client import connect, tool

    @tool("lookup", "Look a word up.", {"type": "object", "properties": {"q": {"type": "string"}}})
    def lookup(args: dict) -> str:
        return f"{args['q']}: a word"

    async with connect("ws://127.0.0.1:8000/ws/agent/", token) as client:
        session = await client.create_session(title="demo", tools=[lookup])
        async for event in session.send("hello"):
            print(event.type, event.session_id, event.seq)

It needs only `websockets`: an agent program installs it without running the server.
"""

from __future__ import annotations

from palimpsest_client.client import DEFAULT_URL, Client, Reconnect, Session, SessionState, connect
from palimpsest_client.errors import (
    AgentExists,
    AgentNotFound,
    AuthenticationError,
    ConnectionLost,
    InvalidRequest,
    NoTurnInProgress,
    PalimpsestError,
    ProtocolError,
    RateLimited,
    SessionEnded,
    SessionNotFound,
    TurnInProgress,
)
from palimpsest_client.events import (
    ApprovalAnswered,
    ApprovalRequested,
    AssistantDelta,
    AssistantMessage,
    CompactionCompleted,
    CompactionFailed,
    CompactionMasked,
    CompactionWarning,
    ErrorEvent,
    Event,
    NotepadUpdated,
    ScratchpadUpdated,
    SessionSpawned,
    SessionStatus,
    TaskEnded,
    TaskStarted,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnStarted,
    Usage,
    UserMessage,
)
from palimpsest_client.http import HttpApi, HttpError
from palimpsest_client.tools import ClientTool, ToolError, ToolHandler, tool

__all__ = [
    "ApprovalAnswered",
    "ApprovalRequested",
    "HttpApi",
    "HttpError",
    "DEFAULT_URL",
    "AgentExists",
    "AgentNotFound",
    "AssistantDelta",
    "AssistantMessage",
    "AuthenticationError",
    "Client",
    "ClientTool",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionMasked",
    "CompactionWarning",
    "ConnectionLost",
    "ErrorEvent",
    "Event",
    "InvalidRequest",
    "NoTurnInProgress",
    "NotepadUpdated",
    "PalimpsestError",
    "ProtocolError",
    "RateLimited",
    "Reconnect",
    "ScratchpadUpdated",
    "Session",
    "SessionEnded",
    "SessionNotFound",
    "SessionSpawned",
    "SessionState",
    "SessionStatus",
    "TaskEnded",
    "TaskStarted",
    "ToolCall",
    "ToolError",
    "ToolHandler",
    "ToolResult",
    "TurnCompleted",
    "TurnInProgress",
    "TurnStarted",
    "Usage",
    "UserMessage",
    "connect",
    "tool",
]
