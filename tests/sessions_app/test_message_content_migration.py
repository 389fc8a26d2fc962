"""The migration that lets a fork's copies share their originals' contents
(0016_message_content_source): copies stored before it share afterwards where their content is
the original's, a fork of a fork names the original, a copy that differs keeps its own, and
undoing it gives every copy its content back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import Message

BEFORE = [("sessions_app", "0015_context_pins")]
AFTER = [("sessions_app", "0016_message_content_source")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; the apps as they stand there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def migrated_back() -> Iterator[Any]:
    apps = _migrate(BEFORE)
    yield apps
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


def _stored_before(apps: Any) -> dict[str, Any]:
    """A root, its fork (one copy changed at the cut) and the fork's fork, as stored before."""
    session_model = apps.get_model("sessions_app", "AgentSession")
    message_model = apps.get_model("sessions_app", "Message")
    root = session_model.objects.create(model="m", context_window=1000)
    fork = session_model.objects.create(
        model="m", context_window=1000, parent_session=root, root_session=root, depth=1
    )
    fork_of_fork = session_model.objects.create(
        model="m", context_window=1000, parent_session=fork, root_session=root, depth=2
    )
    contents = [text("one " * 500), text("two"), text("three " * 100)]
    for position, content in enumerate(contents):
        message_model.objects.create(session=root, position=position, role="user", content=content)
    changed = text("three, with a block taken out")
    for position, content in enumerate([*contents[:2], changed]):
        message_model.objects.create(
            session=fork,
            position=position,
            role="user",
            content=content,
            metadata={"type": "forked", "from_session": str(root.pk), "from_position": position},
        )
    for position, content in enumerate([*contents[:2], changed]):
        message_model.objects.create(
            session=fork_of_fork,
            position=position,
            role="user",
            content=content,
            metadata={"type": "forked", "from_session": str(fork.pk), "from_position": position},
        )
    return {"root": root.pk, "fork": fork.pk, "fork_of_fork": fork_of_fork.pk, "contents": contents}


def _rows(session_id: Any) -> list[Message]:
    return list(messages_with_content(Message.objects.filter(session_id=session_id)).order_by("position"))


def _check_shared(stored: dict[str, Any]) -> None:
    root, fork, fork_of_fork = (_rows(stored[k]) for k in ("root", "fork", "fork_of_fork"))
    changed = text("three, with a block taken out")
    expected = [*stored["contents"][:2], changed]
    assert [resolved(m) for m in root] == stored["contents"]
    assert [resolved(m) for m in fork] == expected and [resolved(m) for m in fork_of_fork] == expected
    # Same content: the original's row named, nothing held; the changed copy holds its own, and
    # the fork of the fork shares it from the fork.
    assert [m.content_source_id for m in fork] == [root[0].pk, root[1].pk, None]
    assert [m.content_source_id for m in fork_of_fork] == [root[0].pk, root[1].pk, fork[2].pk]
    assert Message.objects.filter(content__isnull=False).count() == 4


@pytest.mark.django_db(transaction=True)
def test_copies_stored_before_share_after_the_migration_and_hold_again_when_it_is_undone(migrated_back):
    stored = _stored_before(migrated_back)
    _migrate(AFTER)
    _check_shared(stored)
    apps = _migrate(BEFORE)
    message_model = apps.get_model("sessions_app", "Message")
    held = {
        (str(session_id), position): content
        for session_id, position, content in message_model.objects.values_list(
            "session_id", "position", "content"
        )
    }
    changed = text("three, with a block taken out")
    for key, contents in (("root", stored["contents"]), ("fork_of_fork", [*stored["contents"][:2], changed])):
        assert [held[(str(stored[key]), p)] for p in range(3)] == contents


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_copies_stored_before_share_after_the_migration_on_postgresql(migrated_back):
    assert connection.vendor == "postgresql"
    stored = _stored_before(migrated_back)
    _migrate(AFTER)
    _check_shared(stored)
