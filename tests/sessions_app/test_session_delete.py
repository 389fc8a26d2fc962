"""Deleting a session (issue 30 item 14): one engine operation, `engine.sessions.session_delete`,
that the admin and the dashboard both use."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.contract import Feature, FeatureLifecycle
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, Archive
from tests.dashboard.conftest import session_new
from tests.sessions_app.session_tree_support import rows_left, session_full

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_KIND = {
    "sessions_app.agentsession",
    "sessions_app.archive",
    "sessions_app.message",
    "sessions_app.sessionevent",
    "sessions_app.turn",
    "sessions_app.toolcall",
    "sessions_app.modelcall",
    "sessions_app.maskedresult",
    "sessions_app.recalldocument",
    "memory_app.notepadrevision",
    "memory_app.scratchpad",
    "memory_app.scratchpadrevision",
    "memory_app.observation",
    "memory_app.observationchunk",
    "memory_app.task",
}


async def test_session_full_holds_every_kind_of_row(settings: Any, tmp_path: Path) -> None:
    session = await session_full(settings, tmp_path)
    held = await sync_to_async(rows_left)()
    assert set(held) >= EVERY_KIND, held
    assert await sync_to_async(AgentSession.objects.filter(parent_session=session).count)() == 1
    assert await sync_to_async(Archive.objects.filter(session=session, previous__isnull=False).count)() == 1


async def test_delete_leaves_nothing_of_the_session_and_its_children(settings: Any, tmp_path: Path) -> None:
    session = await session_full(settings, tmp_path)
    child = await sync_to_async(AgentSession.objects.get)(parent_session=session)
    deleted = await sync_to_async(engine_sessions.session_delete)(session_id=session.pk)
    assert deleted == [session.pk, child.pk]
    assert await sync_to_async(rows_left)() == {}


async def test_delete_of_a_child_keeps_its_parent(settings: Any, tmp_path: Path) -> None:
    session = await session_full(settings, tmp_path)
    child = await sync_to_async(AgentSession.objects.get)(parent_session=session)
    await sync_to_async(engine_sessions.session_delete)(session_id=child.pk)
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()
    assert not await sync_to_async(AgentSession.objects.filter(pk=child.pk).exists)()


def _lease(session_id: uuid.UUID) -> None:
    services.turn_begin(session_id=session_id, content="working")


async def test_delete_is_refused_while_a_turn_runs_and_deletes_nothing() -> None:
    session = await sync_to_async(session_new)(title="busy")
    await sync_to_async(_lease)(session.pk)
    with pytest.raises(services.TurnInProgress):
        await sync_to_async(engine_sessions.session_delete)(session_id=session.pk)
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


async def test_delete_is_refused_while_a_child_runs_a_turn() -> None:
    parent = await sync_to_async(session_new)(title="parent")
    child = await sync_to_async(AgentSession.objects.create)(
        title="child",
        model=parent.model,
        context_window=parent.context_window,
        settings=parent.settings,
        parent_session=parent,
        root_session=parent,
        depth=1,
    )
    await sync_to_async(_lease)(child.pk)
    with pytest.raises(services.TurnInProgress):
        await sync_to_async(engine_sessions.session_delete)(session_id=parent.pk)
    assert await sync_to_async(AgentSession.objects.filter(pk__in=[parent.pk, child.pk]).count)() == 2


async def test_delete_after_the_turn_died_goes_ahead() -> None:
    session = await sync_to_async(session_new)(title="dead turn")
    await sync_to_async(_lease)(session.pk)
    await sync_to_async(AgentSession.objects.filter(pk=session.pk).update)(lease_expires_at=None)
    await sync_to_async(engine_sessions.session_delete)(session_id=session.pk)
    assert await sync_to_async(rows_left)() == {}


hook_calls: list[uuid.UUID] = []


def _record(session_id: uuid.UUID) -> None:
    hook_calls.append(session_id)
    if hook_fails:
        raise RuntimeError("the feature could not delete its part")


hook_fails: list[bool] = []
HOOKED = Feature(name="hooked", lifecycle=FeatureLifecycle(delete=_record))


async def test_every_features_delete_hook_runs_for_each_session_children_first(settings: Any) -> None:
    hook_calls.clear()
    settings.PALIMPSEST_FEATURES = [
        *settings.PALIMPSEST_FEATURES,
        "tests.sessions_app.test_session_delete.HOOKED",
    ]
    assert any(name == "hooked" for name, _ in features().lifecycles)
    parent = await sync_to_async(session_new)(title="parent")
    child = await sync_to_async(AgentSession.objects.create)(
        title="child",
        model=parent.model,
        context_window=parent.context_window,
        settings=parent.settings,
        parent_session=parent,
        root_session=parent,
        depth=1,
    )
    await sync_to_async(engine_sessions.session_delete)(session_id=parent.pk)
    assert hook_calls == [child.pk, parent.pk]


async def test_a_failing_delete_hook_deletes_nothing(settings: Any) -> None:
    hook_calls.clear()
    hook_fails.append(True)
    try:
        settings.PALIMPSEST_FEATURES = [
            *settings.PALIMPSEST_FEATURES,
            "tests.sessions_app.test_session_delete.HOOKED",
        ]
        session = await sync_to_async(session_new)(title="kept")
        with pytest.raises(RuntimeError):
            await sync_to_async(engine_sessions.session_delete)(session_id=session.pk)
        assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()
    finally:
        hook_fails.clear()


# -- the admin ---------------------------------------------------------------------------------
async def superuser_client(django_user_model: Any) -> AsyncClient:
    user = await sync_to_async(django_user_model.objects.create_superuser)("root", "root@example.com", "pw")
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def test_a_superuser_deletes_a_full_session_in_the_admin(
    settings: Any, tmp_path: Path, django_user_model: Any
) -> None:
    session = await session_full(settings, tmp_path)
    client = await superuser_client(django_user_model)
    url = f"/admin/sessions_app/agentsession/{session.pk}/delete/"
    page = await client.get(url)
    text = page.content.decode()
    assert page.status_code == 200
    assert "permission to delete" not in text and "protected" not in text
    response = await client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert await sync_to_async(rows_left)() == {}


async def test_the_admin_refuses_to_delete_a_running_session(django_user_model: Any) -> None:
    session = await sync_to_async(session_new)(title="busy")
    await sync_to_async(_lease)(session.pk)
    client = await superuser_client(django_user_model)
    url = f"/admin/sessions_app/agentsession/{session.pk}/delete/"
    response = await client.post(url, {"post": "yes"}, follow=True)
    assert "A turn is running in this session" in response.content.decode()
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


async def test_the_admin_bulk_action_deletes_through_the_same_operation(
    settings: Any, tmp_path: Path, django_user_model: Any
) -> None:
    session = await session_full(settings, tmp_path)
    client = await superuser_client(django_user_model)
    response = await client.post(
        "/admin/sessions_app/agentsession/",
        {"action": "delete_selected", "_selected_action": [str(session.pk)], "post": "yes"},
    )
    assert response.status_code == 302
    assert await sync_to_async(rows_left)() == {}


# -- a client attached to a deleted session ----------------------------------------------------
@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user.message", "content": "hello"},
        {"type": "session.get"},
        {"type": "turn.cancel"},
        {"type": "tool.result", "tool_use_id": "toolu_1", "content": "late"},
    ],
    ids=lambda frame: frame["type"],
)
async def test_a_client_attached_to_a_deleted_session_gets_session_not_found(
    connect: Any, frame: dict
) -> None:
    client = await connect()
    state = await client.create(title="doomed")
    await sync_to_async(engine_sessions.session_delete)(session_id=uuid.UUID(state["id"]))
    assert await client.nothing_more()  # nothing is announced
    await client.send({**frame, "request_id": 7})
    reply = await client.recv()
    assert (reply["type"], reply["code"], reply["request_id"]) == ("error", "session_not_found", 7)
    assert "deleted" in reply["message"]
    # The connection stays open and may create or attach to another session.
    assert (await client.create(title="next"))["title"] == "next"
