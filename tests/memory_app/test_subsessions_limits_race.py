"""Spawns racing from different parents of one tree, and from different trees of one token, are
counted one after another: the bounds hold exactly (SQLite and PostgreSQL).

Threads with their own database connections create children at once; counting is slowed down a
little, so that without the root's and the token's row locks two calls would count the same
children and both create one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from memory_app.subsessions import services
from sessions_app import services as session_services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import AgentSession

COUNT_DELAY_SECONDS = 0.02
CALLS = 8


@pytest.fixture
def slow_counts(monkeypatch: Any) -> None:
    """Widen the window between counting the children and creating one."""
    for name in ("_tree_check", "_client_check"):
        check = getattr(services, name)

        def slowly(*args: Any, _check: Callable = check, **kwargs: Any) -> None:
            _check(*args, **kwargs)
            time.sleep(COUNT_DELAY_SECONDS)

        monkeypatch.setattr(services, name, slowly)


def _spawn(parent: AgentSession, n: int) -> bool:
    try:
        services.subsession_create(
            parent_id=parent.pk,
            tool_use_id=f"toolu_race{n}",
            mode=services.MODE_SPAWN,
            task="Race.",
            settings_defaults=features().default_settings,
        )
    except services.SubsessionRefused:
        return False
    return True


def _race(parents: list[AgentSession]) -> list[bool]:
    """CALLS spawns at once, from the parents in turn; whether each created a child."""
    created: list[bool] = []
    errors: list[BaseException] = []
    start = threading.Barrier(CALLS)

    def work(n: int) -> None:
        try:
            start.wait(timeout=10)
            created.append(_spawn(parents[n % len(parents)], n))
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(CALLS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    return created


def _tree_bound_holds() -> None:
    token, _ = session_services.agent_token_create(name="racer")
    root = engine_sessions.session_create(owner=token, settings={"subsessions": {"max_per_tree": 5}})
    # Two children of the root, each the parent of half the racing calls (their own row locks
    # would not keep each other out: the root's does).
    parents = [
        AgentSession.objects.get(
            pk=services.subsession_create(
                parent_id=root.pk,
                tool_use_id=f"toolu_parent{i}",
                mode=services.MODE_SPAWN,
                task="Parent.",
                settings_defaults=features().default_settings,
            ).pk
        )
        for i in range(2)
    ]
    created = _race(parents)
    assert created.count(True) == 5 - 2
    assert AgentSession.objects.filter(root_session_id=root.pk).count() == 5


def _client_bound_holds() -> None:
    token, _ = session_services.agent_token_create(name="racer")
    settings = {"subsessions": {"max_per_client": 3}}
    roots = [engine_sessions.session_create(owner=token, settings=settings) for _ in range(4)]
    created = _race(roots)
    assert created.count(True) == 3
    assert AgentSession.objects.filter(owner=token, depth=1).count() == 3


@pytest.mark.django_db(transaction=True)
def test_racing_spawns_in_one_tree_never_pass_max_per_tree(slow_counts: None) -> None:
    _tree_bound_holds()


@pytest.mark.django_db(transaction=True)
def test_racing_spawns_of_one_client_never_pass_max_per_client(slow_counts: None) -> None:
    _client_bound_holds()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_racing_spawns_in_one_tree_never_pass_max_per_tree_on_postgresql(slow_counts: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _tree_bound_holds()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_racing_spawns_of_one_client_never_pass_max_per_client_on_postgresql(slow_counts: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _client_bound_holds()


def _full_tree_refused_without_the_locks() -> None:
    """A model's storm of spawn calls past the tree's bound must not queue every other session's
    writes behind its own: the refusal comes from a plain read, while another connection holds
    the token's and the root's row locks (and, on SQLite, the database's one write lock)."""
    token, _ = session_services.agent_token_create(name="storm")
    root = engine_sessions.session_create(owner=token, settings={"subsessions": {"max_per_tree": 1}})
    assert _spawn(root, 0)
    holding, released = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_the_locks() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():
                session_services.agent_token_lock(owner_id=token.pk)
                AgentSession.objects.select_for_update().get(pk=root.pk)
                AgentSession.objects.filter(pk=root.pk).update(title="held")  # the write lock
                holding.set()
                released.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_locks)
    holder.start()
    try:
        assert holding.wait(timeout=30)
        with pytest.raises(services.SubsessionRefused, match="the most one tree may hold"):
            services.subsession_create(
                parent_id=root.pk,
                tool_use_id="toolu_storm",
                mode=services.MODE_SPAWN,
                task="One too many.",
                settings_defaults=features().default_settings,
            )
        # Refused while the locks were still held: the holder had not been released yet.
        assert not released.is_set()
    finally:
        released.set()
        holder.join(timeout=60)
    assert errors == []
    assert AgentSession.objects.filter(root_session_id=root.pk).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_call_past_a_full_trees_bound_is_refused_without_waiting_for_the_write_locks() -> None:
    _full_tree_refused_without_the_locks()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_call_past_a_full_trees_bound_is_refused_without_the_locks_on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    _full_tree_refused_without_the_locks()
