"""Fixtures of the dashboard's tests: an operator, sessions, stored messages, finished turns."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db.models import F

from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, Message

PASSWORD = "operator-password"


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("op", password=PASSWORD, is_staff=True)


@pytest.fixture
def operator_client(client: Any, operator: Any) -> Any:
    client.force_login(operator)
    return client


def session_new(**fields: Any) -> AgentSession:
    """A session as an operator creates it (no agent client owns it)."""
    return engine_sessions.session_create(owner=None, reserved_tool_names=features().tool_names(), **fields)


def message_store(
    session: AgentSession, role: str, content: list[dict], *, metadata: dict | None = None, epoch: int = 0
) -> Message:
    """A stored message (display tests: what a turn would have written)."""
    AgentSession.objects.filter(pk=session.pk).update(next_position=F("next_position") + 1)
    position = AgentSession.objects.values_list("next_position", flat=True).get(pk=session.pk) - 1
    return Message.objects.create(
        session=session,
        position=position,
        epoch=epoch,
        role=role,
        content=content,
        metadata=metadata or {},
        token_estimate=estimate_json_tokens(content),
    )


def chat(session_id: uuid.UUID, content: str) -> None:
    """One whole turn with the session's model (the scripted one in tests)."""

    async def turn() -> None:
        await runner.turn_start(session_id=session_id, content=content)
        await runner.turns_wait_idle(timeout=10)

    async_to_sync(turn)()
