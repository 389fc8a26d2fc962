"""The session page's budget (issue 36 item 4): the usage panel's spend against each limit the
budget sets, and the Edit form's budget fields (raise, lift, a bad value refused)."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import AgentSession
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db


def edit(client: Any, session: AgentSession, **fields: Any) -> Any:
    return client.post(
        f"/sessions/{session.pk}/edit/",
        {"title": session.title, "with_budget_fields": "True", **fields},
        headers={"HX-Request": "true"},
    )


def test_without_a_budget_the_panel_shows_no_budget(operator_client: Any) -> None:
    session = session_new()
    page = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "data-budget" not in page.replace("data-budget-", "")
    assert 'id="id_budget_max_cost_usd"' in page  # the Edit form can set one


def test_the_panel_shows_spend_against_each_limit_set(operator_client: Any) -> None:
    session = session_new(settings={"budget": {"max_input_tokens": 1000, "max_output_tokens": 50}})
    AgentSession.objects.filter(pk=session.pk).update(
        usage_input_tokens=100, usage_cache_read_tokens=150, usage_output_tokens=50
    )
    page = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'data-budget-limit="max_input_tokens"' in page and "250 of 1,000" in page
    assert 'data-budget-limit="max_output_tokens"' in page and "50 of 50" in page
    assert 'data-budget-limit="max_cost_usd"' not in page
    assert page.count("data-budget-reached") == 1  # the output tokens


def test_a_childs_spend_shows_in_its_roots_panel(operator_client: Any) -> None:
    root = session_new(settings={"budget": {"max_output_tokens": 100}})
    AgentSession.objects.create(
        model=root.model,
        context_window=root.context_window,
        compact_threshold=root.compact_threshold,
        settings=root.settings,
        parent_session=root,
        root_session=root,
        depth=1,
        usage_output_tokens=40,
    )
    page = operator_client.get(f"/sessions/{root.pk}/").content.decode()
    assert "40 of 100" in page


def test_the_edit_form_raises_and_lifts_limits(operator_client: Any) -> None:
    session = session_new(settings={"budget": {"max_output_tokens": 50, "max_cost_usd": 1}})
    response = edit(
        operator_client,
        session,
        budget_max_output_tokens="5000",
        budget_max_cost_usd="",
        budget_max_input_tokens="",
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Saved" in html
    assert 'id="usage-panel"' in html and 'hx-swap-oob="true"' in html  # the panel follows
    stored = AgentSession.objects.get(pk=session.pk)
    assert stored.settings["budget"] == {
        "max_cost_usd": None,
        "max_input_tokens": None,
        "max_output_tokens": 5000,
    }


def test_a_post_without_the_budget_fields_leaves_the_budget(operator_client: Any) -> None:
    session = session_new(settings={"budget": {"max_output_tokens": 50}})
    response = operator_client.post(
        f"/sessions/{session.pk}/edit/", {"title": "renamed"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    assert AgentSession.objects.get(pk=session.pk).settings["budget"]["max_output_tokens"] == 50


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"budget_max_output_tokens": "-1"}, "budget_max_output_tokens"),
        ({"budget_max_cost_usd": "lots"}, "budget_max_cost_usd"),
        ({"budget_max_input_tokens": "1.5"}, "budget_max_input_tokens"),
        ({"settings": '{"budget": {"max_cost_usd": -2}}'}, "budget_max_cost_usd"),
    ],
)
def test_a_bad_budget_is_a_form_error_and_changes_nothing(
    operator_client: Any, fields: dict, field: str
) -> None:
    session = session_new(title="kept", settings={"budget": {"max_output_tokens": 50}})
    response = edit(operator_client, session, **{"title": "changed", **fields})
    assert response.status_code == 422
    html = response.content.decode()
    assert f'data-field="{field}"' in html and "field-error" in html
    stored = AgentSession.objects.get(pk=session.pk)
    assert (stored.title, stored.settings) == ("kept", session.settings)
