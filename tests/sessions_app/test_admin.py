"""The Django admin: every model is there; the scratchpad and settings are edited safely."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadRevision
from memory_app.scratchpad.selectors import scratchpad_get
from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, AgentToken, SessionEvent

pytestmark = pytest.mark.django_db


def change_url(session: AgentSession) -> str:
    return reverse("admin:sessions_app_agentsession_change", args=[session.pk])


def form_data(client: Client, session: AgentSession) -> dict[str, Any]:
    form = client.get(change_url(session)).context["adminform"].form
    return {name: form[name].value() for name in form.fields if form[name].value() is not None}


def agent_sets(session: AgentSession, action: str, **args: Any) -> None:
    scratchpad_services.scratchpad_apply(
        session_id=session.id,
        action=action,
        args=args,
        author="agent",
        limits=scratchpad_services.ScratchpadLimits.from_settings(session.settings),
    )


@pytest.mark.parametrize("app_label", ["sessions_app", "memory_app"])
def test_every_model_has_an_admin_page_that_opens(admin_client: Client, app_label: str) -> None:
    for model in apps.get_app_config(app_label).get_models():
        if model._meta.auto_created:
            continue
        assert admin.site.is_registered(model), model
        url = reverse(f"admin:{app_label}_{model._meta.model_name}_changelist")
        assert admin_client.get(url).status_code == 200, url


def test_operator_edits_scratchpad_spaces_through_the_service(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None)
    data = form_data(admin_client, session) | {
        "scratchpad_notes": "operator notes",
        "scratchpad_refs": "src/a.py\n\n  https://example.org/x  \n",
    }
    assert admin_client.post(change_url(session), data).status_code == 302
    view = scratchpad_get(session_id=session.id)
    assert (view.notes, view.plan, view.refs) == ("operator notes", "", ["src/a.py", "https://example.org/x"])
    authors = set(ScratchpadRevision.objects.values_list("space", "author"))
    assert authors == {("notes", "operator:admin"), ("refs", "operator:admin")}
    events = SessionEvent.objects.filter(type="scratchpad.updated").values_list("payload", flat=True)
    assert {e["space"] for e in events} == {"notes", "refs"}


def test_stale_scratchpad_edit_is_refused_and_the_agents_value_kept(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None)
    data = form_data(admin_client, session) | {"scratchpad_plan": "operator plan"}
    agent_sets(session, "set_plan", content="agent plan")  # meanwhile
    response = admin_client.post(change_url(session), data)
    assert response.status_code == 200
    assert "changed while you edited it" in response.content.decode()
    assert scratchpad_get(session_id=session.id).plan == "agent plan"
    # Saving again, now knowingly over version 1, replaces it.
    retry = form_data(admin_client, session) | {"scratchpad_plan": "operator plan"}
    assert admin_client.post(change_url(session), retry).status_code == 302
    assert scratchpad_get(session_id=session.id).plan == "operator plan"


def test_unchanged_spaces_are_not_written_when_other_fields_are_saved(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None)
    agent_sets(session, "set_notes", content="agent notes")
    data = form_data(admin_client, session) | {"title": "renamed"}
    assert admin_client.post(change_url(session), data).status_code == 302
    assert ScratchpadRevision.objects.count() == 1
    assert AgentSession.objects.get(pk=session.pk).title == "renamed"


def test_scratchpad_value_over_the_sessions_limit_is_a_form_error(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None, settings={"scratchpad": {"plan_max_chars": 10}})
    data = form_data(admin_client, session) | {"scratchpad_plan": "x" * 11}
    response = admin_client.post(change_url(session), data)
    assert response.status_code == 200
    assert "this session allows 10" in response.content.decode()
    assert scratchpad_get(session_id=session.id).plan == ""


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("settings", {"notepad": {"position": "footer"}}, "settings.notepad.position must be one of"),
        ("settings", {"max_steps_per_turn": 0}, "settings.max_steps_per_turn must be an integer"),
        (
            "client_tools",
            [{"name": "bad name", "input_schema": {"type": "object"}}],
            "tools[0].name must match",
        ),
    ],
)
def test_invalid_settings_or_tools_are_refused(
    admin_client: Client, field: str, value: Any, message: str
) -> None:
    session = engine_sessions.session_create(owner=None)
    before = (session.settings, session.client_tools)
    data = form_data(admin_client, session) | {field: json.dumps(value)}
    response = admin_client.post(change_url(session), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    session.refresh_from_db()
    assert (session.settings, session.client_tools) == before


def test_partial_settings_are_completed_with_defaults(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None)
    data = form_data(admin_client, session) | {"settings": json.dumps({"max_steps_per_turn": 7})}
    assert admin_client.post(change_url(session), data).status_code == 302
    session.refresh_from_db()
    assert session.settings["max_steps_per_turn"] == 7
    assert session.settings["notepad"] == {
        "enabled": True,
        "position": "epoch",
        "history_max_chars": 2_000_000,
    }


def test_archives_events_and_messages_are_read_only(admin_client: Client) -> None:
    for name in ("archive", "sessionevent", "message", "modelcall", "toolcall", "turn"):
        assert admin_client.get(reverse(f"admin:sessions_app_{name}_add")).status_code == 403


def test_saving_the_session_keeps_what_a_running_turn_wrote_meanwhile(admin_client: Client) -> None:
    session = engine_sessions.session_create(owner=None)
    data = form_data(admin_client, session) | {"title": "renamed"}
    turn = services.turn_begin(session_id=session.id, content="hello")  # counters move on
    assert admin_client.post(change_url(session), data).status_code == 302
    session.refresh_from_db()
    assert (session.title, session.last_seq, session.next_position) == ("renamed", 2, 1)
    assert session.current_turn_id == turn.id
    services.event_emit(session_id=session.id, type="still.works", payload={})
    assert session.events.filter(seq=3).exists()


# ---------------------------------------------------------------------------
# Agent tokens: made in the admin, shown once
# ---------------------------------------------------------------------------
TOKEN_ADD = "admin:sessions_app_agenttoken_add"


def test_a_token_added_in_the_admin_is_shown_once_and_stored_as_its_hash(admin_client: Client) -> None:
    response = admin_client.post(reverse(TOKEN_ADD), {"name": "ci-agent"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    raw = re.search(r'id="agent-token"[^>]* value="(pal_[^"]+)"', response.content.decode()).group(1)  # type: ignore[union-attr]
    (token,) = AgentToken.objects.all()
    assert token.name == "ci-agent"
    assert token.token_hash == services.agent_token_hash(raw) and raw.startswith(token.prefix)
    assert services.agent_token_authenticate(raw=raw) == token
    assert LogEntry.objects.get().object_id == str(token.pk)
    # Never again: not on the token's page, not in the list.
    for url in (
        reverse("admin:sessions_app_agenttoken_change", args=[token.pk]),
        reverse("admin:sessions_app_agenttoken_changelist"),
    ):
        page = admin_client.get(url).content.decode()
        assert token.prefix in page and raw not in page


def test_the_add_form_asks_only_for_a_name(admin_client: Client) -> None:
    form = admin_client.get(reverse(TOKEN_ADD)).context["adminform"].form
    assert list(form.fields) == ["name"]


def test_a_token_without_a_name_is_a_form_error_and_nothing_is_made(admin_client: Client) -> None:
    response = admin_client.post(reverse(TOKEN_ADD), {"name": ""})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["name"]
    assert not AgentToken.objects.exists()
    assert 'id="agent-token"' not in response.content.decode()


def test_admin_rows_are_named_for_what_they_are():
    """Admin lists and delete pages name rows by what they hold, not "Message object (243)"."""
    from sessions_app.models import Archive, Message

    session = engine_sessions.session_create(owner=None)
    message = Message.objects.create(session=session, position=3, epoch=1, role="user", content=[])
    archive = Archive(session=session, epoch=1, summary="s")
    assert str(message) == "user message at position 3 (epoch 1)"
    assert str(archive) == "archive of epoch 1"
