"""Retention (issue 36 item 7): `PALIMPSEST_RETENTION_DAYS` deletes ended sessions that long after
they ended, with their trees, through the one delete path; from each process's periodic sweep and
from `manage.py palimpsest_purge [--dry-run]`."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from sessions_app import services
from sessions_app.engine import retention
from sessions_app.models import AgentSession, RecallDocument, SessionStatus
from tests.dashboard.conftest import chat, session_new
from tests.sessions_app.session_tree_support import session_full

pytestmark = pytest.mark.django_db(transaction=True)


def _end(session_id: uuid.UUID, *, days_ago: float) -> None:
    """End the session's tree as `session.end` does, then date its end `days_ago` back."""
    ids = services.session_end_request(session_id=session_id)
    assert services.session_end_finish(session_ids=ids, reason="client")
    AgentSession.objects.filter(pk__in=ids).update(ended_at=timezone.now() - timedelta(days=days_ago))


def _rows_of(ids: list[uuid.UUID]) -> dict[str, int]:
    """Every row of sessions_app and memory_app that names one of the sessions, per model."""
    counts: dict[str, int] = {}
    for label in ("sessions_app", "memory_app"):
        for model in apps.get_app_config(label).get_models():
            fields = {f.attname for f in model._meta.concrete_fields}
            column = "session_id" if "session_id" in fields else "id" if model is AgentSession else None
            if column is None:
                continue
            count = model._default_manager.filter(**{f"{column}__in": ids}).count()
            if count:
                counts[model._meta.label_lower] = count
    return counts


def _fts_orphans() -> int:
    """Entries of SQLite's full-text index of recall with no document left (none on PostgreSQL,
    where the index is a column of the documents)."""
    if connection.vendor != "sqlite":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_recalldocument_fts")
        (indexed,) = cursor.fetchone()
    return indexed - RecallDocument.objects.count()


async def test_purge_deletes_only_trees_ended_past_retention_and_everything_they_hold(
    settings: Any, tmp_path: Path, vendor: str
) -> None:
    old = await session_full(settings, tmp_path)
    old_child = await sync_to_async(AgentSession.objects.get)(parent_session=old)
    recent = await sync_to_async(session_new)(title="ended last week")
    await sync_to_async(chat)(recent.pk, "remember: keep me")
    idle = await sync_to_async(session_new)(title="never ended")
    await sync_to_async(AgentSession.objects.filter(pk=idle.pk).update)(
        created_at=timezone.now() - timedelta(days=400), last_activity_at=timezone.now() - timedelta(days=400)
    )
    await sync_to_async(_end)(old.pk, days_ago=31)
    await sync_to_async(_end)(recent.pk, days_ago=7)
    assert await sync_to_async(_rows_of)([old.pk, old_child.pk])  # it holds rows of every kind

    purge = await sync_to_async(retention.sessions_purge)(days=30)

    assert (purge.deleted, purge.sessions_deleted, purge.skipped) == ([old.pk], 2, [])
    assert await sync_to_async(_rows_of)([old.pk, old_child.pk]) == {}
    assert await sync_to_async(_fts_orphans)() == 0
    kept = await sync_to_async(_rows_of)([recent.pk, idle.pk])
    assert kept["sessions_app.agentsession"] == 2 and kept["sessions_app.message"] >= 2
    # A second purge finds nothing more.
    assert (await sync_to_async(retention.sessions_purge)(days=30)).deleted == []


async def test_a_dry_run_deletes_nothing_and_says_what_would_go() -> None:
    session = await sync_to_async(session_new)(title="old")
    await sync_to_async(chat)(session.pk, "hello")
    await sync_to_async(_end)(session.pk, days_ago=90)
    purge = await sync_to_async(retention.sessions_purge)(days=30, dry_run=True)
    assert (purge.deleted, purge.sessions_deleted) == ([session.pk], 1)
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


async def test_a_tree_whose_turn_runs_is_left_for_a_later_purge() -> None:
    busy = await sync_to_async(session_new)(title="ended, but a turn holds its lease")
    done = await sync_to_async(session_new)(title="ended")
    await sync_to_async(_end)(busy.pk, days_ago=40)
    await sync_to_async(_end)(done.pk, days_ago=35)
    # A turn's live lease (status ended only by a racing writer: the purge must still refuse it).
    await sync_to_async(AgentSession.objects.filter(pk=busy.pk).update)(
        current_turn_id=uuid.uuid4(), lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    purge = await sync_to_async(retention.sessions_purge)(days=30)
    assert (purge.deleted, purge.skipped) == ([done.pk], [busy.pk])
    assert await sync_to_async(AgentSession.objects.filter(pk=busy.pk).exists)()


async def test_a_session_ending_is_not_purged_until_it_has_ended(settings: Any) -> None:
    """`session.end` marks `ended_at` at once and the status once the turn is over: only the
    status `ended` counts."""
    session = await sync_to_async(session_new)(title="ending")
    await sync_to_async(AgentSession.objects.filter(pk=session.pk).update)(
        ended_at=timezone.now() - timedelta(days=60), status=SessionStatus.RUNNING
    )
    assert (await sync_to_async(retention.sessions_purge)(days=30)).deleted == []


async def test_the_periodic_sweep_purges_when_retention_is_on_and_due(settings: Any) -> None:
    session = await sync_to_async(session_new)(title="old")
    await sync_to_async(_end)(session.pk, days_ago=3)
    retention.retention_sweep_forget()
    settings.PALIMPSEST_RETENTION_DAYS = None
    assert await retention.retention_sweep_if_due() is None  # off by default
    settings.PALIMPSEST_RETENTION_DAYS = 2
    settings.PALIMPSEST_RETENTION_SWEEP_SECONDS = 3600
    purge = await retention.retention_sweep_if_due()
    assert purge is not None and purge.deleted == [session.pk]
    assert not await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()
    assert await retention.retention_sweep_if_due() is None  # not due again within the hour
    retention.retention_sweep_forget()


async def test_the_command_lists_purges_and_refuses_without_a_retention(settings: Any) -> None:
    session = await sync_to_async(session_new)(title="old")
    await sync_to_async(_end)(session.pk, days_ago=10)
    settings.PALIMPSEST_RETENTION_DAYS = None
    with pytest.raises(CommandError, match="Retention is off"):
        await sync_to_async(call_command)("palimpsest_purge", "--dry-run")
    with pytest.raises(CommandError, match="at least 1"):
        await sync_to_async(call_command)("palimpsest_purge", "--days", "0")

    out = StringIO()
    await sync_to_async(call_command)("palimpsest_purge", "--dry-run", "--days", "7", stdout=out)
    assert f"would delete {session.pk}" in out.getvalue()
    assert "Would delete 1 ended session tree(s), 1 session(s)" in out.getvalue()
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()

    settings.PALIMPSEST_RETENTION_DAYS = 7
    out = StringIO()
    await sync_to_async(call_command)("palimpsest_purge", stdout=out)
    assert f"deleted {session.pk}" in out.getvalue()
    assert not await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()
