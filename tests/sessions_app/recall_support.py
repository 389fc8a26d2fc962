"""Helpers of the `recall` index and search tests: sessions with and without an agent, turns
written through the services, the documents and the FTS5 table as stored."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import Agent, AgentSession, RecallDocument
from sessions_app.recall_models import RECALL_FTS_TABLE


def agent_make(name: str = "helper", owner: str = "client") -> Agent:
    return Agent.objects.create(owner_name=owner, name=name)


def session_make(agent: Agent | None = None, title: str = "") -> AgentSession:
    session = engine_sessions.session_create(owner=None, title=title or None, agent=agent)
    return AgentSession.objects.get(pk=session.pk)


def call_data() -> services.ModelCallData:
    return services.ModelCallData(
        provider="scripted",
        model="scripted",
        step=1,
        purpose="turn",
        request_record={"messages": []},
        request_sha256="0" * 64,
        request_bytes=2,
        stable_prefix_bytes=0,
        estimated_prompt_tokens=1,
        started_at=timezone.now(),
        duration_ms=1,
        first_token_ms=None,
        response=None,
        stop_reason="end_turn",
        usage={"input_tokens": 5, "output_tokens": 2},
    )


def exchange(session: AgentSession, said: str, answered: str) -> None:
    """One turn: the user's words, the model's answer, the turn ended."""
    turn = services.turn_begin(session_id=session.pk, content=said)
    epoch = AgentSession.objects.values_list("epoch", flat=True).get(pk=session.pk)
    services.assistant_step_store_last(
        session_id=session.pk,
        turn_id=turn.id,
        epoch=epoch,
        content=[{"type": "text", "text": answered}],
        call=call_data(),
        steps=1,
    )


def compact(session: AgentSession, summary: str) -> None:
    """Close the session's epoch with `summary` (as an operator's compaction, no turn)."""
    epoch = AgentSession.objects.values_list("epoch", flat=True).get(pk=session.pk)
    services.compaction_store(
        session_id=session.pk,
        turn_id=None,
        epoch=epoch,
        summary=summary,
        summary_message=f"[Summary of the conversation so far.]\n{summary}",
        tokens_before=100,
        tokens_after=10,
        trigger="operator",
    )


def documents(**filters: Any) -> list[tuple[str, str, str]]:
    """(kind, role, text) of the documents matching `filters`, in order."""
    return list(RecallDocument.objects.filter(**filters).order_by("id").values_list("kind", "role", "text"))


def fts_rows(word: str) -> int:
    """How many rows SQLite's FTS5 table matches for `word` (the index itself, not the table)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT COUNT(*) FROM "{RECALL_FTS_TABLE}" WHERE "{RECALL_FTS_TABLE}" MATCH %s', [word]
        )
        return int(cursor.fetchone()[0])
