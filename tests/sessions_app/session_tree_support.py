"""A session that holds something of every feature (notepad revisions, scratchpad, observations,
tasks, archives, a sub-session), for the deletion tests; and what is left of it afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import connection

from sessions_app.engine import runner
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.models import AgentSession, MaskedResult
from tests.dashboard.conftest import chat, session_new
from tests.memory_app.observation_helpers import big_log, use_fs_root

# Rows that do not belong to one session: they outlive it.
SHARED_MODELS = {"sessions_app.agenttoken", "sessions_app.requestpart"}


async def session_full(settings: Any, tmp_path: Path) -> AgentSession:
    """A root session with two archives, notepad and scratchpad revisions, an offloaded
    observation, a task and a child session (built by the scripted model's turns)."""
    root = use_fs_root(settings, tmp_path)
    (root / "big.log").write_text(big_log())
    session = await sync_to_async(session_new)(title="to delete")
    for message in (
        "remember: the deploy key is in vault",
        "plan: read; grep; report",
        "read big.log",
        "task audit: check the logs",
        "spawn summarize the log",
    ):
        await sync_to_async(chat)(session.pk, message)
    for _ in range(2):
        await compaction_operator_start(session_id=session.pk)
        await runner.turns_wait_idle(timeout=10)
        await sync_to_async(chat)(session.pk, "remember: after a compaction")
    # A masked result (the masking tier's record; the session's window is too large to mask).
    await sync_to_async(MaskedResult.objects.create)(
        session=session, epoch=2, tool_use_id="toolu_masked", size_chars=10, placeholder="[masked]"
    )
    return session


def rows_left() -> dict[str, int]:
    """Every table of sessions_app and memory_app that holds a session's rows, with its count
    (only those not empty)."""
    counts: dict[str, int] = {}
    for label in ("sessions_app", "memory_app"):
        for model in apps.get_app_config(label).get_models():
            if model._meta.label_lower in SHARED_MODELS:
                continue
            count = model._default_manager.count()
            if count:
                counts[model._meta.label_lower] = count
    if connection.vendor == "sqlite":
        # recall's full-text index on SQLite is an FTS5 table of its own, kept by triggers
        # (PostgreSQL's is a column of the documents' rows, counted above).
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM sessions_app_recalldocument_fts")
            (count,) = cursor.fetchone()
        if count:
            counts["sessions_app_recalldocument_fts"] = count
    return counts
