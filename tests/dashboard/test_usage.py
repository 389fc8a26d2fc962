"""Usage and cost on the dashboard: the session page's usage panel (and its live fragment), and
the session list's token and cost columns, sort and filters. (The totals and prices themselves:
tests/sessions_app/test_usage.py.)"""

from __future__ import annotations

import re
from typing import Any

import pytest

from sessions_app import selectors as session_selectors
from sessions_app.dashboard import selectors
from sessions_app.dashboard.fragments import session_fragments
from sessions_app.models import AgentSession, AgentToken
from tests.dashboard.conftest import chat, session_new

PRICES = {
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1},
}


def usage_set(session: AgentSession, **counts: int) -> AgentSession:
    AgentSession.objects.filter(pk=session.pk).update(**counts)
    session.refresh_from_db()
    return session


# ---------------------------------------------------------------------------
# The session page's usage panel
# ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_panel_shows_the_tokens_cache_hit_share_and_cost(operator_client, settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "anthropic"  # a priced model's provider answers it
    session = usage_set(
        session_new(model="claude-sonnet-4-6"),
        usage_model_calls=3,
        usage_input_tokens=1000,
        usage_output_tokens=500,
        usage_cache_creation_tokens=1000,
        usage_cache_read_tokens=2000,
    )
    html = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    panel = html.split('id="usage-panel"', 1)[1].split("</div>", 1)[0]
    assert re.search(r'data-usage="input">.*?<td class="num mono">1000</td>', panel)
    assert re.search(r'data-usage="total">.*?<td class="num mono">4500</td>', panel)
    assert 'data-usage="calls">3<' in panel
    assert ">50.0%<" in panel  # 2000 of 4000 prompt tokens read from the cache
    # 1000 × 3 + 500 × 15 + 1000 × 3.75 + 2000 × 0.3 = 14,850 per million
    assert 'data-usage="cost">$0.0149<' in panel


@pytest.mark.django_db
def test_panel_of_a_model_without_a_price_shows_tokens_only(operator_client):
    session = usage_set(session_new(model="scripted"), usage_input_tokens=42)
    html = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    panel = html.split('id="usage-panel"', 1)[1].split("</div>", 1)[0]
    assert (
        "the scripted model answers this session here" in panel
        and "$" not in panel.split("An estimate", 1)[0]
    )


@pytest.mark.django_db
def test_panel_of_a_claude_session_the_scripted_model_answers_shows_no_cost(operator_client, settings):
    """Without a key every session is answered by the scripted model: its page says so and
    shows no cost, in the panel and in the list (issue 30 item 15)."""
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "scripted"
    session = usage_set(session_new(model="claude-sonnet-4-6"), usage_input_tokens=500_000)
    html = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    panel = html.split('id="usage-panel"', 1)[1].split("</div>", 1)[0]
    assert "the scripted model answers this session here" in panel
    assert "$" not in panel.split("An estimate", 1)[0]
    row = operator_client.get("/").content.decode().split(f'id="session-row-{session.pk}"', 1)[1]
    assert re.search(r'data-col="cost"[^>]*>–<', row.split("</tr>", 1)[0])


@pytest.mark.django_db(transaction=True)
def test_the_live_fragment_of_a_model_call_carries_the_new_totals():
    session = session_new()
    chat(session.pk, "hello")
    session.refresh_from_db()
    events = session_selectors.session_events_after(session_id=session.pk, after_seq=0)
    usage_event = next(event for event in events if event["type"] == "usage")
    html = session_fragments(session_id=session.pk, events=[usage_event], operator="op")
    panel = html.split('id="usage-panel" class="usage-card" hx-swap-oob="true"', 1)[1].split("</div>", 1)[0]
    assert 'data-usage="calls">1<' in panel
    output = session.usage_output_tokens
    assert output > 0 and re.search(rf'data-usage="output">.*?<td class="num mono">{output}</td>', panel)


@pytest.mark.django_db
def test_notepad_edits_do_not_render_the_usage_panel():
    from memory_app.notepad import services as notepad_services

    session = session_new()
    notepad_services.notepad_write(session_id=session.pk, content="x", author="agent")
    events = session_selectors.session_events_after(session_id=session.pk, after_seq=0)
    assert 'id="usage-panel"' not in session_fragments(session_id=session.pk, events=events, operator="op")


# ---------------------------------------------------------------------------
# The session list: columns, sort, filters
# ---------------------------------------------------------------------------
def row_ids(html: str) -> list[str]:
    return re.findall(r'<tr id="session-row-([0-9a-f-]{36})"', html)


def listed(client: Any, query: str) -> tuple[int, str]:
    response = client.get(f"/{query}")
    return response.status_code, response.content.decode()


@pytest.fixture
def priced_sessions(settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "anthropic"
    cheap = usage_set(session_new(title="cheap", model="claude-haiku-4-5"), usage_input_tokens=900_000)
    dear = usage_set(session_new(title="dear", model="claude-sonnet-4-6"), usage_input_tokens=500_000)
    unpriced = usage_set(session_new(title="unpriced", model="scripted"), usage_input_tokens=2_000_000)
    return cheap, dear, unpriced


@pytest.mark.django_db
def test_list_shows_tokens_and_cost_columns(operator_client, priced_sessions):
    cheap, dear, unpriced = priced_sessions
    _, html = listed(operator_client, "")
    row = html.split(f'id="session-row-{dear.pk}"', 1)[1].split("</tr>", 1)[0]
    assert re.search(r'data-col="tokens"[^>]*>500k<', row) and 'data-col="cost">$1.50<' in row
    row = html.split(f'id="session-row-{unpriced.pk}"', 1)[1].split("</tr>", 1)[0]
    assert 'title="no cost: scripted has no price, or the scripted model answers it here">–<' in row


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("cost", ["cheap", "dear", "unpriced"]),  # no price: last either way
        ("-cost", ["dear", "cheap", "unpriced"]),
        ("tokens", ["dear", "cheap", "unpriced"]),
        ("-tokens", ["unpriced", "cheap", "dear"]),
        ("title", ["cheap", "dear", "unpriced"]),
        ("-title", ["unpriced", "dear", "cheap"]),
    ],
)
def test_list_sorts_by_a_column(operator_client, priced_sessions, sort, order):
    by_id = {str(s.pk): s.title for s in priced_sessions}
    status, html = listed(operator_client, f"?sort={sort}")
    assert status == 200 and [by_id[i] for i in row_ids(html)] == order


@pytest.mark.django_db
def test_a_sorted_headers_link_reverses_it_and_keeps_the_filters(operator_client, priced_sessions):
    _, html = listed(operator_client, "?sort=-cost&status=idle")
    header = html.split('data-sort="cost"', 1)[1].split("</th>", 1)[0]
    assert 'aria-sort="descending"' in header and 'href="?status=idle&amp;sort=cost"' in header
    assert '<input type="hidden" name="sort" value="-cost" form="session-filters">' in html


@pytest.mark.django_db
def test_list_filters_by_owner(operator_client):
    token = AgentToken.objects.create(name="robot", token_hash="h" * 64, prefix="p")
    theirs = session_new(title="theirs")
    AgentSession.objects.filter(pk=theirs.pk).update(owner=token)
    mine = session_new(title="mine")
    assert row_ids(listed(operator_client, "?owner=robot")[1]) == [str(theirs.pk)]
    assert row_ids(listed(operator_client, "?owner=operator")[1]) == [str(mine.pk)]
    assert row_ids(listed(operator_client, "?owner=nobody")[1]) == []
    assert '<option value="robot">client robot</option>' in listed(operator_client, "")[1]


@pytest.mark.django_db
def test_list_filters_by_having_sub_sessions(operator_client):
    parent = session_new(title="parent")
    AgentSession.objects.create(
        title="child",
        model=parent.model,
        context_window=parent.context_window,
        parent_session=parent,
        root_session=parent,
        depth=1,
    )
    alone = session_new(title="alone")
    assert row_ids(listed(operator_client, "?children=yes")[1]) == [str(parent.pk)]
    assert row_ids(listed(operator_client, "?children=no")[1]) == [str(alone.pk)]


@pytest.mark.django_db
def test_list_filters_by_model(operator_client, priced_sessions):
    cheap, _, _ = priced_sessions
    assert row_ids(listed(operator_client, "?model=claude-haiku-4-5")[1]) == [str(cheap.pk)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "?status=sleeping",
            "status: Unknown status &#x27;sleeping&#x27;: use one of idle, running, compacting, error,"
            " ended.",
        ),
        ("?children=maybe", "children: Unknown children value &#x27;maybe&#x27;: use one of yes, no."),
        ("?sort=price", "sort: Unknown sort &#x27;price&#x27;: use one of title, status"),
        ("?page=0", "page: Ensure this value is greater than or equal to 1."),
        ("?page=two", "page: page must be a whole number, 1 or more."),
        ("?model=" + "m" * 101, "model: Ensure this value has at most 100 characters"),
    ],
)
def test_bad_list_parameters_get_a_clear_message_and_no_rows(operator_client, query, message):
    session_new(title="a session")
    status, html = listed(operator_client, query)
    assert status == 400 and message in html
    assert row_ids(html) == [] and "Fix the list's parameters to see sessions." in html


@pytest.mark.django_db
def test_list_pages_keep_the_sort(operator_client, settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    size = selectors.SESSION_LIST_PAGE_SIZE
    for index in range(size + 2):
        usage_set(session_new(title=f"s{index}", model="claude-haiku-4-5"), usage_output_tokens=index)
    _, first = listed(operator_client, "?sort=tokens")
    assert "page=2" in first and 'href="?sort=tokens&page=2"' in first.replace("&amp;", "&")
    _, second = listed(operator_client, "?sort=tokens&page=2")
    titles = re.findall(r'<a href="/sessions/[0-9a-f-]{36}/">(s\d+)</a>', second)
    assert titles == [f"s{size}", f"s{size + 1}"]
