"""The session list and creating a session from the browser; who may see the dashboard at all."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.engine.features import features
from sessions_app.engine.providers import default_model
from sessions_app.models import AgentSession, Archive, SessionStatus
from tests.dashboard.conftest import message_store, session_new

pytestmark = pytest.mark.django_db


def test_anonymous_visitor_is_sent_to_the_login_page(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_logged_in_user_who_is_not_staff_is_sent_to_the_login_page(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("visitor", password="x"))
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_htmx_request_without_login_redirects_the_whole_page(client):
    response = client.get("/", headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/?q=x"})
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith("/accounts/login/?next=")


def test_login_page_says_how_to_get_an_operator_account(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"make run" in response.content


def test_staff_user_logs_in_and_lands_on_the_session_list(client, operator):
    response = client.post(
        "/accounts/login/", {"username": "op", "password": "operator-password", "next": "/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_list_shows_status_model_prompt_tokens_and_counts(operator_client):
    session = session_new(title="Report writer", context_window=50_000)
    AgentSession.objects.filter(pk=session.pk).update(status=SessionStatus.RUNNING, last_prompt_tokens=12_345)
    for _ in range(3):
        message_store(session, "user", [{"type": "text", "text": "hi"}])
    Archive.objects.create(
        session=session, epoch=0, summary="s", message_count=3, tokens_before=1, tokens_after=1
    )
    response = operator_client.get("/")
    row = response.context["sessions"][0]
    assert (row.title, row.message_count, row.compaction_count) == ("Report writer", 3, 1)
    html = response.content.decode()
    assert "Report writer" in html and "running" in html and "12.3k / 50k" in html


def test_list_filters_by_status(operator_client):
    session_new(title="calm")
    busy = session_new(title="busy")
    AgentSession.objects.filter(pk=busy.pk).update(status=SessionStatus.ERROR)
    titles = [s.title for s in operator_client.get("/?status=error").context["sessions"]]
    assert titles == ["busy"]


def test_list_searches_titles_and_id_prefixes(operator_client):
    wanted = session_new(title="invoice parser")
    session_new(title="other")
    by_title = operator_client.get("/?q=INVOICE").context["sessions"]
    by_id = operator_client.get(f"/?q={str(wanted.pk)[:8]}").context["sessions"]
    assert [s.pk for s in by_title] == [wanted.pk] == [s.pk for s in by_id]


def test_htmx_filter_request_renders_only_the_table(operator_client):
    session_new(title="one")
    response = operator_client.get("/?q=one", headers={"HX-Request": "true", "HX-Target": "session-table"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="session-table"') and "<html" not in html


def test_list_websocket_url_carries_the_filters(operator_client):
    html = operator_client.get("/?q=abc&status=idle").content.decode()
    assert 'ws-connect="/ws/dashboard/?q=abc&amp;status=idle&amp;sort=-activity"' in html


def test_creating_a_session_from_the_browser_opens_its_page(operator_client):
    response = operator_client.post(
        "/sessions/new/",
        {"title": "From the browser", "context_window": "5000", "compact_threshold": "0.5", "settings": ""},
    )
    session = AgentSession.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert (session.owner, session.title, session.context_window, session.compact_threshold) == (
        None,
        "From the browser",
        5000,
        0.5,
    )
    assert session.model == default_model()


def test_a_session_created_without_a_threshold_gets_the_servers_default(operator_client, settings):
    settings.PALIMPSEST_COMPACT_THRESHOLD = 0.7
    operator_client.post("/sessions/new/", {"title": "default threshold", "compact_threshold": ""})
    assert AgentSession.objects.get().compact_threshold == 0.7


def test_htmx_create_redirects_with_hx_redirect(operator_client):
    response = operator_client.post("/sessions/new/", {"title": "x"}, headers={"HX-Request": "true"})
    assert response["HX-Redirect"] == f"/sessions/{AgentSession.objects.get().pk}/"


def test_create_with_settings_json_applies_them_with_defaults(operator_client):
    operator_client.post("/sessions/new/", {"settings": '{"notepad": {"position": "message"}}'})
    settings = AgentSession.objects.get().settings
    assert settings["notepad"] == {"enabled": True, "position": "message", "history_max_chars": 2_000_000}
    assert settings["scratchpad"]["notes_max_chars"] == 4000


def test_create_with_invalid_settings_shows_the_error_and_creates_nothing(operator_client):
    response = operator_client.post("/sessions/new/", {"settings": '{"notepad": {"position": "nowhere"}}'})
    assert response.status_code == 422
    assert "settings.notepad.position must be one of" in response.content.decode()
    assert not AgentSession.objects.exists()


def test_create_with_settings_that_are_not_json_shows_where(operator_client):
    response = operator_client.post("/sessions/new/", {"settings": "{nope"})
    assert response.status_code == 422 and "Not JSON" in response.content.decode()


def test_posts_without_a_csrf_token_are_refused(operator):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert strict.post("/sessions/new/", {"title": "x"}).status_code == 403
    assert not AgentSession.objects.exists()


def test_every_page_sends_the_csrf_token_with_htmx_requests(operator_client):
    html = operator_client.get("/").content.decode()
    token = operator_client.cookies["csrftoken"].value
    assert 'hx-headers=\'{"X-CSRFToken": "' in html and token


# ---------------------------------------------------------------------------
# The new-session form's generated setting fields
# ---------------------------------------------------------------------------
def _leaves(rules: dict, path: tuple = ()) -> list[tuple]:
    """Every setting a form field sets: all but a map of tool names (`approvals`), which the
    advanced JSON sets."""
    return [
        leaf
        for key, rule in rules.items()
        if isinstance(rule, dict) or rule[0] != "policy_map"
        for leaf in (_leaves(rule, (*path, key)) if isinstance(rule, dict) else [(*path, key)])
    ]


def browser_form(operator_client) -> dict[str, str]:
    """The new-session form as a browser submits it untouched (an unchecked box is left out)."""
    form = operator_client.get("/").context["create_form"]
    data: dict[str, str] = {}
    for field in form:
        value = field.value()
        if field.widget_type == "checkbox":
            if value:
                data[field.html_name] = "on"
        elif value is not None:
            data[field.html_name] = str(value)
    return data


def test_the_form_has_a_field_for_every_features_setting(operator_client):
    html = operator_client.get("/").content.decode()
    leaves = _leaves(features().settings_rules)
    assert ("notepad", "enabled") in leaves and ("scratchpad", "notes_max_chars") in leaves
    for path in leaves:
        assert f'name="setting__{"__".join(path)}"' in html


def test_the_untouched_form_makes_a_session_with_the_default_settings(operator_client):
    response = operator_client.post("/sessions/new/", browser_form(operator_client))
    assert response.status_code == 302
    assert AgentSession.objects.get().settings == features().default_settings


def test_switches_and_knobs_set_the_sessions_settings(operator_client):
    data = browser_form(operator_client)
    del data["setting__scratchpad__enabled"]  # unchecked
    data |= {"setting__notepad__position": "message", "setting__scratchpad__notes_max_chars": "1000"}
    assert operator_client.post("/sessions/new/", data).status_code == 302
    settings = AgentSession.objects.get().settings
    assert settings["scratchpad"]["enabled"] is False and settings["scratchpad"]["notes_max_chars"] == 1000
    assert settings["notepad"] == {"enabled": True, "position": "message", "history_max_chars": 2_000_000}
    assert settings["subsessions"] == features().default_settings["subsessions"]


def test_an_emptied_number_keeps_its_default(operator_client):
    data = browser_form(operator_client) | {"setting__offload__ttl_seconds": ""}
    operator_client.post("/sessions/new/", data)
    assert (
        AgentSession.objects.get().settings["offload"]["ttl_seconds"]
        == features().default_settings["offload"]["ttl_seconds"]
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("setting__scratchpad__notes_max_chars", "0", "greater than or equal to 1"),
        ("setting__offload__scope", "everywhere", "Select a valid choice"),
        ("setting__max_steps_per_turn", "many", "Enter a whole number"),
        ("context_window", "10", "greater than or equal to 1000"),
    ],
)
def test_a_bad_field_is_an_error_beside_it_and_nothing_is_made(operator_client, name, value, message):
    response = operator_client.post("/sessions/new/", browser_form(operator_client) | {name: value})
    assert response.status_code == 422
    html = response.content.decode()
    beside = html.split(f'data-field="{name}"', 1)[1].split("data-field=", 1)[0]
    assert 'class="field-error"' in beside and message in beside
    assert not AgentSession.objects.exists()


def test_advanced_json_applies_over_the_fields(operator_client):
    data = browser_form(operator_client) | {"settings": '{"notepad": {"position": "message"}}'}
    assert data["setting__notepad__position"] == "epoch"
    operator_client.post("/sessions/new/", data)
    assert AgentSession.objects.get().settings["notepad"]["position"] == "message"


def test_bad_advanced_json_is_an_error_beside_it(operator_client):
    data = browser_form(operator_client) | {"settings": '{"notepad": {"colour": "red"}}'}
    response = operator_client.post("/sessions/new/", data)
    assert response.status_code == 422
    beside = response.content.decode().split('data-field="settings"', 1)[1]
    assert "unknown setting settings.notepad.colour" in beside.split("</details>", 1)[0]
    assert not AgentSession.objects.exists()


def test_a_failed_form_keeps_what_was_typed(operator_client):
    data = browser_form(operator_client) | {"title": "Keep me", "setting__scratchpad__notes_max_chars": "0"}
    del data["setting__tasks__enabled"]
    form = operator_client.post("/sessions/new/", data).context["create_form"]
    assert form["title"].value() == "Keep me"
    assert form["setting__tasks__enabled"].value() is False


@pytest.mark.django_db
def test_a_session_no_call_has_measured_says_so_instead_of_a_dash(operator_client):
    session_new(title="fresh", context_window=4000)
    html = operator_client.get("/").content.decode()
    assert "not measured yet / 4k" in html
    assert "– / 4k" not in html


def test_the_model_picker_offers_only_models_a_configured_provider_serves(operator_client, settings):
    """The new-session form's list of models holds the table's models of the configured
    providers, and without any provider only the scripted model, which then answers them all."""
    import re

    def offered() -> list[str]:
        page = operator_client.get("/").content.decode()
        datalist = re.search(r'<datalist id="known-models">(.*?)</datalist>', page, re.S)
        assert datalist is not None
        return re.findall(r'<option value="([^"]+)">', datalist.group(1))

    settings.PALIMPSEST_PROVIDER = "scripted"
    assert offered() == ["scripted"]
    settings.PALIMPSEST_PROVIDER = "anthropic"
    models = offered()
    assert "claude-sonnet-4-6" in models and "scripted" in models
    assert not [m for m in models if m.startswith("gpt-")]
    settings.OPENAI_API_KEY = "o-key"
    models = offered()
    assert "claude-sonnet-4-6" in models and "gpt-4.1" in models and models[-1] == "scripted"
