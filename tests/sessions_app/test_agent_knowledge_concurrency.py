"""Two sessions of one agent (and an operator) changing its knowledge at once lose nothing:
state versions strictly increase, a new key set by two at once is created once and set twice,
and every learned-text edit lands (SQLite here; PostgreSQL in the services pass, where the agent
row's lock is what serializes them).

Each writer is a thread with its own database connection. The step between reading the current
value and writing the new one is slowed down a little, so that without the lock two writers
would read the same version and one update would be lost (or the insert of a new key collide).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone as django_timezone

from sessions_app import agent_knowledge_selectors as selectors
from sessions_app import services
from sessions_app.agent_models import AgentVersion
from sessions_app.common.text_edits import TextEdit
from sessions_app.services.agent_knowledge import learned as learned_module
from sessions_app.services.agent_knowledge import state as state_module
from tests.sessions_app.agent_knowledge_support import agent_events, agent_make, agent_session_make

SETS_PER_WRITER = 12
DELAY_SECONDS = 0.002


class _SlowClock:
    """`timezone` for the state service: its `now()`, taken under the lock between reading the
    entry and writing it, waits a little."""

    @staticmethod
    def now() -> Any:
        time.sleep(DELAY_SECONDS)
        return django_timezone.now()


@pytest.fixture
def slow_writes(monkeypatch: Any) -> None:
    monkeypatch.setattr(state_module, "timezone", _SlowClock)
    apply = learned_module.text_edit_apply

    def slowly(**kwargs: Any) -> str:
        time.sleep(DELAY_SECONDS)
        return apply(**kwargs)

    monkeypatch.setattr(learned_module, "text_edit_apply", slowly)


def _run_together(*works: Callable[[], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(len(works))

    def run(work: Callable[[], None]) -> None:
        try:
            start.wait(timeout=10)
            work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


def _state_race() -> None:
    agent = agent_make()
    sessions = [agent_session_make(agent), agent_session_make(agent)]
    seen: dict[int, list[int]] = {0: [], 1: []}

    def writer(index: int) -> Callable[[], None]:
        session = sessions[index]

        def work() -> None:
            for i in range(SETS_PER_WRITER):
                # "shared" is new to both at first: created once, then set by both.
                row = services.agent_state_set(
                    agent_id=agent.pk,
                    key="shared",
                    value=f"{index}-{i}",
                    author=f"agent:{session.id}",
                    session_id=session.id,
                )
                seen[index].append(row.version)

        return work

    _run_together(writer(0), writer(1))
    total = 2 * SETS_PER_WRITER
    for index in (0, 1):
        assert seen[index] == sorted(seen[index]) and len(set(seen[index])) == SETS_PER_WRITER
    assert sorted(seen[0] + seen[1]) == list(range(1, total + 1))
    assert selectors.agent_state_get(agent_id=agent.pk, key="shared").version == total
    # Each session's events carry its own sets' versions, in order.
    for index in (0, 1):
        assert [e["version"] for e in agent_events(sessions[index])] == seen[index]


def _learned_race() -> None:
    agent = agent_make()
    session = agent_session_make(agent)

    def agent_writer() -> None:
        for i in range(SETS_PER_WRITER):
            services.agent_learned_update(
                agent_id=agent.pk,
                edit=TextEdit(operation="append", content=f"agent {i}\n"),
                author=f"agent:{session.id}",
                max_chars=100_000,
                session_id=session.id,
            )

    def operator_writer() -> None:
        for i in range(SETS_PER_WRITER):
            services.agent_learned_update(
                agent_id=agent.pk,
                edit=TextEdit(operation="append", content=f"operator {i}\n"),
                author="operator:ann",
                max_chars=100_000,
            )

    _run_together(agent_writer, operator_writer)
    text, version = selectors.agent_learned_get(agent_id=agent.pk)
    lines = text.splitlines()
    assert version == 2 * SETS_PER_WRITER
    assert sorted(lines) == sorted(
        [f"agent {i}" for i in range(SETS_PER_WRITER)] + [f"operator {i}" for i in range(SETS_PER_WRITER)]
    )
    for who in ("agent", "operator"):
        assert [line for line in lines if line.startswith(who)] == [
            f"{who} {i}" for i in range(SETS_PER_WRITER)
        ]
    stored = list(AgentVersion.objects.filter(agent=agent, part="learned").order_by("version"))
    assert [v.version for v in stored] == list(range(1, 2 * SETS_PER_WRITER + 1))
    assert stored[-1].content == text


def _skill_race() -> None:
    """Two sessions write one new skill at once: it is created once, and every write is a version."""
    agent = agent_make()
    sessions = [agent_session_make(agent), agent_session_make(agent)]

    def writer(index: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(SETS_PER_WRITER):
                services.agent_skill_write(
                    agent_id=agent.pk,
                    name="shared",
                    description=f"by {index}",
                    content=f"{index}-{i}",
                    author=f"agent:{sessions[index].id}",
                    max_skills=64,
                    session_id=sessions[index].id,
                )

        return work

    _run_together(writer(0), writer(1))
    stored = list(AgentVersion.objects.filter(agent=agent, part="skill", name="shared").order_by("version"))
    assert [v.version for v in stored] == list(range(1, 2 * SETS_PER_WRITER + 1))
    assert selectors.agent_skill_get(agent_id=agent.pk, name="shared").version == 2 * SETS_PER_WRITER


@pytest.mark.django_db(transaction=True)
def test_two_sessions_setting_one_key_at_once_keep_every_version_in_order(slow_writes: None) -> None:
    _state_race()


@pytest.mark.django_db(transaction=True)
def test_the_agent_and_an_operator_editing_the_learned_text_at_once_lose_no_edit(slow_writes: None) -> None:
    _learned_race()


@pytest.mark.django_db(transaction=True)
def test_two_sessions_writing_one_new_skill_at_once_keep_every_version() -> None:
    _skill_race()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_sessions_writing_one_new_skill_at_once_on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _skill_race()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_sessions_setting_one_key_at_once_on_postgresql(slow_writes: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _state_race()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_learned_text_edits_racing_on_postgresql_lose_no_edit(slow_writes: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _learned_race()
