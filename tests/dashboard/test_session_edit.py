"""The session page's Edit form (issue 30 item 9c): an operator changes the window, threshold,
title and settings through the same operation as a client's `session.update`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from sessions_app.models import AgentSession, SessionEvent
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db


def edit_url(session: AgentSession) -> str:
    return f"/sessions/{session.pk}/edit/"


def unchanged(session: AgentSession) -> bool:
    after = AgentSession.objects.get(pk=session.pk)
    return (after.title, after.context_window, after.compact_threshold, after.settings, after.last_seq) == (
        session.title,
        session.context_window,
        session.compact_threshold,
        session.settings,
        session.last_seq,
    )


def test_the_session_page_has_the_edit_form_with_the_current_values(operator_client: Any) -> None:
    session = session_new(title="shown", context_window=60_000)
    page = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'hx-post="/sessions/{session.pk}/edit/"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert 'value="60000"' in page


def test_a_good_edit_changes_the_session_and_shows_the_form_saved(operator_client: Any) -> None:
    session = session_new(title="old", settings={"max_steps_per_turn": 7})
    response = operator_client.post(
        edit_url(session),
        {
            "title": "new",
            "context_window": "50000",
            "compact_threshold": "0.5",
            "settings": json.dumps({"notepad": {"position": "message"}}),
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "Saved" in response.content.decode()
    stored = AgentSession.objects.get(pk=session.pk)
    assert (stored.title, stored.context_window, stored.compact_threshold) == ("new", 50_000, 0.5)
    assert stored.settings["notepad"]["position"] == "message"
    assert stored.settings["max_steps_per_turn"] == 7
    assert SessionEvent.objects.filter(session_id=session.pk, type="session.updated").exists()


def test_empty_fields_leave_the_session_as_it_is(operator_client: Any) -> None:
    session = session_new(title="kept", context_window=60_000)
    response = operator_client.post(edit_url(session), {"title": "kept"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert unchanged(session)


def test_a_plain_post_is_redirected_to_the_session_page(operator_client: Any) -> None:
    session = session_new(title="old")
    response = operator_client.post(edit_url(session), {"title": "new"})
    assert (response.status_code, response["Location"]) == (302, f"/sessions/{session.pk}/")
    assert AgentSession.objects.get(pk=session.pk).title == "new"


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"context_window": "10"}, "context_window", "context_window must be an integer"),
        ({"compact_threshold": "1.5"}, "compact_threshold", "compact_threshold must be a number"),
        ({"settings": '{"notepad": {"position": "nowhere"}}'}, "settings", "settings.notepad.position"),
        ({"settings": "{not json"}, "settings", "Not JSON"),
        ({"context_window": "many"}, "context_window", "whole number"),
    ],
)
def test_a_bad_value_shows_a_form_error_and_changes_nothing(
    operator_client: Any, fields: dict, field: str, says: str
) -> None:
    session = session_new(title="kept")
    response = operator_client.post(
        edit_url(session), {"title": "changed", **fields}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert f'data-field="{field}"' in html and says in html
    assert unchanged(session)


def test_a_post_without_the_csrf_token_is_refused(operator: Any) -> None:
    session = session_new(title="kept")
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(edit_url(session), {"title": "taken"}, headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert unchanged(session)


def test_a_non_operator_is_refused(client: Any, django_user_model: Any) -> None:
    session = session_new(title="kept")
    assert client.post(edit_url(session), {"title": "anon"}).status_code == 302  # to the login page
    user = django_user_model.objects.create_user("plain", password="pw", is_staff=False)
    client.force_login(user)
    response = client.post(edit_url(session), {"title": "plain"})
    assert response.status_code in (302, 403)
    assert unchanged(session)


def test_edit_by_get_is_not_allowed(operator_client: Any) -> None:
    session = session_new(title="kept")
    assert operator_client.get(edit_url(session)).status_code == 405
