"""The client's exceptions. A server `error` frame answering one of the client's frames is raised
as a `ProtocolError` carrying the protocol's `code` (a subclass for the codes a program is likely
to handle on their own); the connection's end is `AuthenticationError` (close code 4401: the
token is wrong or revoked, never retried) or `ConnectionLost`."""

from __future__ import annotations

CLOSE_UNAUTHORIZED = 4401


class PalimpsestError(Exception):
    """Base of every exception this package raises."""


class ProtocolError(PalimpsestError):
    """The server answered a frame with `{"type": "error", "code", "message"}`."""

    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


class TurnInProgress(ProtocolError):
    """`turn_in_progress`: the session runs a turn already."""


class NoTurnInProgress(ProtocolError):
    """`no_turn_in_progress`: there is no running turn to cancel."""


class SessionNotFound(ProtocolError):
    """`session_not_found`: no such session for this token."""


class RateLimited(ProtocolError):
    """`rate_limited`: the token went over one of its quotas; the frame was not handled."""


class AgentNotFound(ProtocolError):
    """`agent_not_found`: this client has no agent of that name (PROTOCOL.md v1.2)."""


class AgentExists(ProtocolError):
    """`agent_exists`: this client has an agent of that name already."""


class SessionEnded(ProtocolError):
    """`session_ended`: the session was ended (`session.end`) and takes no more messages."""


class InvalidRequest(ProtocolError):
    """The frame was refused as malformed or out of bounds (`invalid_frame`, `invalid_value`,
    `invalid_settings`, `invalid_tools`, `frame_too_large`, `invalid_json`, `unknown_type`; over
    HTTP also `invalid_document` and `too_large`)."""


_BY_CODE: dict[str, type[ProtocolError]] = {
    "turn_in_progress": TurnInProgress,
    "no_turn_in_progress": NoTurnInProgress,
    "session_not_found": SessionNotFound,
    "rate_limited": RateLimited,
    "agent_not_found": AgentNotFound,
    "agent_exists": AgentExists,
    "session_ended": SessionEnded,
    **dict.fromkeys(
        (
            "invalid_frame",
            "invalid_value",
            "invalid_settings",
            "invalid_tools",
            "frame_too_large",
            "invalid_json",
            "unknown_type",
            # The HTTP API's (PROTOCOL.md v1.2): an import document refused, a body over the limit.
            "invalid_document",
            "too_large",
        ),
        InvalidRequest,
    ),
}


def protocol_error(code: str, message: str, request_id: str | None = None) -> ProtocolError:
    """The exception for an error frame's code (`ProtocolError` itself for the other codes)."""
    return _BY_CODE.get(code, ProtocolError)(code, message, request_id)


class ConnectionLost(PalimpsestError):
    """The connection ended and was not (or could not be) restored. `close_code` is the
    websocket close code when the server sent one."""

    def __init__(self, message: str, close_code: int | None = None) -> None:
        super().__init__(message)
        self.close_code = close_code


class AuthenticationError(ConnectionLost):
    """The server closed the connection with 4401: the token is missing, wrong or revoked.
    Reconnecting with the same token cannot help, so the client does not try."""
