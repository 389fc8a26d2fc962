"""What every dashboard read starts from: the session an operator named, or `NotFound`."""

from __future__ import annotations

import uuid
from typing import Any

from sessions_app.models import AgentSession


class NotFound(Exception):
    """No such session (or no such thing in this session)."""


def uuid_or_not_found(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError) as exc:
        raise NotFound from exc


def session_get_for_operator(*, session_id: Any) -> AgentSession:
    session = AgentSession.objects.filter(pk=uuid_or_not_found(session_id)).first()
    if session is None:
        raise NotFound
    return session
