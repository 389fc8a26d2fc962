"""An operator's edit racing the agent's edit on PostgreSQL: the session row lock queues them, so
the loser either gets a conflict (operator) or builds on the winner's value (agent's append).
Nothing is ever lost. Each test holds one writer's transaction open while the other one waits."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from memory_app.scratchpad.selectors import scratchpad_get, scratchpad_revisions
from memory_app.scratchpad.services import (
    ScratchpadConflict,
    ScratchpadLimits,
    scratchpad_apply,
    scratchpad_space_set,
)
from sessions_app.authors import AGENT_AUTHOR, operator_author
from sessions_app.engine.sessions import session_create
from sessions_app.models import SessionEvent

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_notepad"),
]

LIMITS = ScratchpadLimits(notes_max_chars=4000, plan_max_chars=2000, refs_max_items=50)
ALICE = operator_author("alice")


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are tested on PostgreSQL (the `services` pass)")


def agent_append(session_id: uuid.UUID, text: str) -> Any:
    return scratchpad_apply(
        session_id=session_id,
        action="append_notes",
        args={"content": text},
        author=AGENT_AUTHOR,
        limits=LIMITS,
    )


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = fn()
        except Exception as exc:
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_until_another_backend_waits_for_our_lock(timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            # pg_locks is live (pg_stat_activity would be a snapshot inside this transaction).
            cursor.execute(
                "SELECT count(*) FROM pg_locks "
                "WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the second writer never waited for the first one's lock")


def test_operator_edit_behind_an_agent_edit_gets_a_conflict_not_a_lost_update() -> None:
    session = session_create(owner=None)
    agent_append(session.id, "finding 1")
    loaded = scratchpad_get(session_id=session.id).notes_version  # the operator's editor opens

    with transaction.atomic():
        agent_append(session.id, "finding 2")  # the agent's edit is underway, its transaction open
        thread, outcome = in_thread(
            lambda: scratchpad_space_set(
                session_id=session.id, space="notes", value="rewritten", author=ALICE, expected_version=loaded
            )
        )
        wait_until_another_backend_waits_for_our_lock()
    thread.join(10)

    conflict = outcome["error"]
    assert isinstance(conflict, ScratchpadConflict)
    assert (conflict.current_value, conflict.current_version) == ("finding 1\nfinding 2", 2)
    assert scratchpad_get(session_id=session.id).notes == "finding 1\nfinding 2"


def test_agent_append_behind_an_operator_edit_builds_on_it() -> None:
    session = session_create(owner=None)
    agent_append(session.id, "finding 1")

    with transaction.atomic():
        scratchpad_space_set(
            session_id=session.id, space="notes", value="summary", author=ALICE, expected_version=1
        )
        thread, outcome = in_thread(lambda: agent_append(session.id, "finding 2"))
        wait_until_another_backend_waits_for_our_lock()
    thread.join(10)

    assert "error" not in outcome
    assert scratchpad_get(session_id=session.id).notes == "summary\nfinding 2"
    trail = [
        (r.version, r.author, r.value) for r in scratchpad_revisions(session_id=session.id, space="notes")
    ]
    assert trail == [(1, "agent", "finding 1"), (2, ALICE, "summary"), (3, "agent", "summary\nfinding 2")]
    seqs = list(SessionEvent.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == [1, 2, 3]
