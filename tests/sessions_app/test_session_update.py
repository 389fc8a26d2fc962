"""Changing a session after creating it (PROTOCOL.md v1.2's `session.update`, issue 30 item 9c):
`engine.sessions.session_update`, checked as `session.create` is, all or nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, SessionEvent
from sessions_app.validation import SpecError

pytestmark = pytest.mark.django_db


def session_new(**fields: Any) -> AgentSession:
    return engine_sessions.session_create(owner=None, reserved_tool_names=features().tool_names(), **fields)


def test_update_stores_every_field_and_announces_what_changed() -> None:
    session = session_new(title="old")
    updated = engine_sessions.session_update(
        session_id=session.pk,
        title="new",
        context_window=50_000,
        compact_threshold=0.5,
        settings={"notepad": {"position": "message"}},
    )
    stored = AgentSession.objects.get(pk=session.pk)
    assert (stored.title, stored.context_window, stored.compact_threshold) == ("new", 50_000, 0.5)
    assert stored.settings["notepad"] == {
        "enabled": True,
        "position": "message",
        "history_max_chars": 2_000_000,
    }
    assert updated.settings == stored.settings
    event = SessionEvent.objects.filter(session_id=session.pk).order_by("-seq").first()
    assert event is not None and event.type == "session.updated"
    assert event.payload["title"] == "new"
    assert event.payload["context_window"] == 50_000
    assert event.payload["compact_threshold"] == 0.5
    assert event.payload["settings"] == stored.settings


def test_settings_merge_into_the_current_settings_not_the_defaults() -> None:
    session = session_new(settings={"max_steps_per_turn": 7})
    engine_sessions.session_update(session_id=session.pk, settings={"notepad": {"position": "message"}})
    stored = AgentSession.objects.get(pk=session.pk)
    assert stored.settings["max_steps_per_turn"] == 7
    assert stored.settings["notepad"]["position"] == "message"


def test_only_the_given_fields_change() -> None:
    session = session_new(title="kept", context_window=60_000)
    engine_sessions.session_update(session_id=session.pk, compact_threshold=0.6)
    stored = AgentSession.objects.get(pk=session.pk)
    assert (stored.title, stored.context_window, stored.compact_threshold) == ("kept", 60_000, 0.6)
    event = SessionEvent.objects.filter(session_id=session.pk).order_by("-seq").first()
    assert event is not None and event.payload == {"compact_threshold": 0.6}


@pytest.mark.parametrize(
    ("fields", "code", "named"),
    [
        ({"context_window": 10}, "invalid_value", "context_window"),
        ({"compact_threshold": 1.5}, "invalid_value", "compact_threshold"),
        ({"title": "x" * 1000}, "invalid_value", "title"),
        ({"settings": {"notepad": {"position": "nowhere"}}}, "invalid_settings", "settings.notepad.position"),
        ({"settings": {"no_such_setting": 1}}, "invalid_settings", "no_such_setting"),
        ({"settings": "not an object"}, "invalid_settings", "settings"),
    ],
)
def test_a_bad_value_changes_nothing_and_names_the_field(fields: dict, code: str, named: str) -> None:
    session = session_new(title="kept")
    before = AgentSession.objects.get(pk=session.pk)
    good = {"title": "changed", "context_window": 50_000, "compact_threshold": 0.5}
    with pytest.raises(SpecError) as raised:
        engine_sessions.session_update(session_id=session.pk, **(good | fields))
    assert raised.value.code == code
    assert named in raised.value.message
    after = AgentSession.objects.get(pk=session.pk)
    assert (after.title, after.context_window, after.compact_threshold, after.settings, after.last_seq) == (
        before.title,
        before.context_window,
        before.compact_threshold,
        before.settings,
        before.last_seq,
    )


def test_an_update_that_changes_nothing_announces_nothing() -> None:
    session = session_new(title="same")
    engine_sessions.session_update(session_id=session.pk, title="same")
    assert not SessionEvent.objects.filter(session_id=session.pk, type="session.updated").exists()


def test_the_service_writes_only_the_updatable_fields() -> None:
    session = session_new()
    with pytest.raises(ValueError, match="model"):
        services.session_settings_update(session_id=session.pk, changes={"model": "other"})


def test_an_unknown_session_is_does_not_exist() -> None:
    with pytest.raises(AgentSession.DoesNotExist):
        engine_sessions.session_update(session_id=uuid.uuid4(), title="x")
