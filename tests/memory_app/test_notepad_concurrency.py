"""Agent and operator edits racing on one notepad lose no update (SQLite and PostgreSQL).

Threads with their own database connections play two agent writers (no version: serialized by
the session's row lock) and an operator (read, edit, write naming the version read; on a conflict,
read again and retry, as the dashboard and the admin do). The operator's first edit is made stale
on purpose, so the conflict path is always exercised; and applying an edit is slowed down a little,
so that without the row lock two writers would read the same content and one update would be lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from memory_app.notepad import selectors, services
from memory_app.notepad.services import NotepadConflict
from sessions_app.authors import AGENT_AUTHOR
from tests.memory_app.notepad_support import notepad_events, revisions, session_make

EDITS_PER_WRITER = 15
APPLY_DELAY_SECONDS = 0.002


@pytest.fixture
def slow_apply(monkeypatch: Any) -> None:
    """Widen the window between reading the notepad and writing it back."""
    apply = services.notepad_edit_apply

    def slowly(**kwargs: Any) -> str:
        time.sleep(APPLY_DELAY_SECONDS)
        return apply(**kwargs)

    monkeypatch.setattr(services, "notepad_edit_apply", slowly)


def _in_thread(work: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    return threading.Thread(target=run)


def _race() -> tuple[str, int, int]:
    """Run the race; returns (final content, final version, operator conflicts)."""
    session = session_make()
    operator_read = threading.Event()
    agent_wrote = threading.Event()
    conflicts = 0

    def agent(name: str) -> None:
        operator_read.wait(timeout=10)
        for i in range(EDITS_PER_WRITER):
            services.notepad_update(
                session_id=session.id,
                operation="append",
                content=f"{name} {i}\n",
                author=AGENT_AUTHOR,
            )
            agent_wrote.set()

    def operator() -> None:
        nonlocal conflicts
        for i in range(EDITS_PER_WRITER):
            while True:
                state = selectors.notepad_get(session_id=session.id)
                if not operator_read.is_set():
                    operator_read.set()
                    agent_wrote.wait(timeout=10)  # the agents move on: this edit is now stale
                try:
                    services.notepad_write(
                        session_id=session.id,
                        content=state.content + f"operator {i}\n",
                        author="operator:alice",
                        expected_version=state.version,
                    )
                    break
                except NotepadConflict:
                    conflicts += 1

    errors: list[BaseException] = []
    threads = [
        _in_thread(lambda: agent("agent-a"), errors),
        _in_thread(lambda: agent("agent-b"), errors),
        _in_thread(operator, errors),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    state = selectors.notepad_get(session_id=session.id)
    assert [r[0] for r in revisions(session)] == list(range(1, state.version + 1))
    assert [e["version"] for e in notepad_events(session)] == list(range(1, state.version + 1))
    return state.content, state.version, conflicts


def _assert_no_update_lost(content: str, version: int, conflicts: int) -> None:
    expected = {f"{who} {i}" for who in ("agent-a", "agent-b", "operator") for i in range(EDITS_PER_WRITER)}
    lines = content.splitlines()
    assert sorted(lines) == sorted(expected)  # every edit present, each exactly once
    assert version == 3 * EDITS_PER_WRITER  # one version per successful edit, no more
    assert conflicts >= 1  # the operator's stale edit was refused, not applied


@pytest.mark.django_db(transaction=True)
def test_agent_and_operator_edits_racing_lose_no_update(slow_apply: None) -> None:
    _assert_no_update_lost(*_race())


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_agent_and_operator_edits_racing_on_postgresql_lose_no_update(slow_apply: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _assert_no_update_lost(*_race())
