"""Cost a user can see (issue 32, item 3): the usage panel's table of turns (each turn's calls,
its input split into uncached, written and read, the read share and the billed cost at the
model's cache prices, a page at a time), and the session list's cost at the cache prices."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from sessions_app.dashboard import selectors
from sessions_app.models import AgentSession, ModelCall, Turn
from sessions_app.usage import model_price
from tests.dashboard.conftest import chat, session_new
from tests.dashboard.test_usage import PRICES, usage_set


@pytest.fixture
def priced(settings: Any) -> None:
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "anthropic"


def turns_made(session: AgentSession, count: int) -> list[Turn]:
    start = timezone.now() - timedelta(hours=1)
    return [
        Turn.objects.create(session=session, started_at=start + timedelta(seconds=i), steps=1)
        for i in range(count)
    ]


def call_made(session: AgentSession, turn: Turn | None, **usage: int) -> ModelCall:
    return ModelCall.objects.create(
        session=session, turn=turn, provider="anthropic", model=session.model, request={}, **usage
    )


def table(client: Any, session: AgentSession, query: str = "") -> tuple[int, str]:
    response = client.get(f"/sessions/{session.pk}/usage/turns/{query}")
    return response.status_code, response.content.decode()


def row(html: str, turn: str) -> str:
    return html.split(f'data-turn="{turn}"', 1)[1].split("</tr>", 1)[0]


def cell(row_html: str, kind: str) -> str:
    match = re.search(rf'data-usage="{kind}"[^>]*>([^<]*)<', row_html)
    assert match, kind
    return match.group(1)


@pytest.mark.django_db
def test_each_turn_shows_its_calls_input_split_read_share_and_cost_at_the_cache_prices(
    operator_client, priced
):
    session = session_new(model="claude-sonnet-4-6")
    first, second = turns_made(session, 2)
    call_made(session, first, input_tokens=4000, cache_creation_input_tokens=6000, output_tokens=100)
    call_made(session, second, input_tokens=10, cache_creation_input_tokens=990, cache_read_input_tokens=9000)
    call_made(session, second, input_tokens=10, cache_read_input_tokens=10_000, output_tokens=200)
    status, html = table(operator_client, session)
    assert status == 200
    newest = row(html, "2")
    assert [cell(newest, k) for k in ("calls", "input", "cache_write", "cache_read")] == [
        "2",
        "20",
        "990",
        "19,000",
    ]
    assert cell(newest, "cache_hit") == "95.0%"  # 19,000 of 20,010 input tokens read
    # 20 × 3 + 990 × 3.75 + 19,000 × 0.3 + 200 × 15 = 12,472.5 per million: reads at a tenth.
    assert cell(newest, "cost") == "$0.0125"
    oldest = row(html, "1")
    assert cell(oldest, "cache_hit") == "0.0%" and cell(oldest, "cost") == "$0.0360"
    # Newest first.
    assert html.index('data-turn="2"') < html.index('data-turn="1"')
    page = selectors.turn_usage_page(session=session, price=model_price(session.model))
    assert [r.cost for r in page.rows] == pytest.approx([0.0124725, 0.036])


@pytest.mark.django_db
def test_a_turn_without_usage_and_an_unpriced_session_show_dashes(operator_client):
    session = session_new(model="scripted")
    (turn,) = turns_made(session, 1)
    call_made(session, turn)  # a failed call: no usage
    _, html = table(operator_client, session)
    only = row(html, "1")
    assert cell(only, "calls") == "1" and cell(only, "input") == "0"
    assert cell(only, "cache_hit") == "–" and cell(only, "cost") == "–"
    assert 'title="no price: tokens only"' in only


@pytest.mark.django_db
def test_a_priced_model_the_scripted_provider_answers_has_no_cost(operator_client, settings):
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    settings.PALIMPSEST_PROVIDER = "scripted"
    session = session_new(model="claude-sonnet-4-6")
    (turn,) = turns_made(session, 1)
    call_made(session, turn, input_tokens=500_000)
    _, html = table(operator_client, session)
    assert cell(row(html, "1"), "cost") == "–"


@pytest.mark.django_db
def test_calls_outside_any_turn_are_one_row_of_the_first_page(operator_client, priced):
    session = session_new(model="claude-haiku-4-5")
    (turn,) = turns_made(session, 1)
    call_made(session, turn, input_tokens=100)
    call_made(session, None, input_tokens=1_000_000)  # an operator's compaction
    _, html = table(operator_client, session)
    outside = row(html, "outside")
    assert "outside turns" in outside and cell(outside, "cost") == "$1.00"


@pytest.mark.django_db
def test_a_long_session_is_shown_a_page_at_a_time_in_a_bounded_number_of_queries(
    operator_client, priced, django_assert_max_num_queries
):
    session = session_new(model="claude-haiku-4-5")
    size = selectors.TURN_USAGE_PAGE_SIZE
    turns = turns_made(session, 2 * size + 3)
    ModelCall.objects.bulk_create(
        ModelCall(session=session, turn=t, provider="anthropic", model="m", request={}, input_tokens=i)
        for i, t in enumerate(turns)
        for _ in range(3)
    )
    with django_assert_max_num_queries(5):
        page = selectors.turn_usage_page(session=session, price=None)
    assert [r.ordinal for r in page.rows] == list(range(2 * size + 3, size + 3, -1))
    assert page.turns == 2 * size + 3 and page.older_than == turns[size + 3].pk
    _, html = table(operator_client, session)
    assert html.count('class="turn-usage-row"') == size and "data-follow" in html
    assert f"?before={turns[size + 3].pk}" in html and "Older turns" in html
    # The next page: rows to put in place of the button, and a button for the rest.
    status, older = table(operator_client, session, f"?before={turns[size + 3].pk}")
    assert status == 200 and 'id="turn-usage"' not in older
    assert re.findall(r'data-turn="(\d+)"', older) == [str(n) for n in range(size + 3, 3, -1)]
    assert cell(row(older, str(size + 3)), "calls") == "3"
    _, last = table(operator_client, session, f"?before={turns[3].pk}")
    assert re.findall(r'data-turn="(\d+)"', last) == ["3", "2", "1"] and "Older turns" not in last


@pytest.mark.django_db
def test_a_bad_or_foreign_turn_is_404(operator_client):
    session, other = session_new(), session_new()
    (theirs,) = turns_made(other, 1)
    assert table(operator_client, session, "?before=not-a-uuid")[0] == 404
    assert table(operator_client, session, f"?before={theirs.pk}")[0] == 404


@pytest.mark.django_db
def test_a_session_without_turns_says_so(operator_client):
    _, html = table(operator_client, session_new())
    assert "No turn yet." in html and 'class="turn-usage-row"' not in html


@pytest.mark.django_db(transaction=True)
def test_the_session_page_loads_the_table_of_real_turns(operator_client):
    session = session_new()
    chat(session.pk, "hello")
    chat(session.pk, "remember: the table of turns")
    page = operator_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'hx-get="/sessions/{session.pk}/usage/turns/" hx-trigger="intersect once"' in page
    _, html = table(operator_client, session)
    assert cell(row(html, "2"), "calls") == "2" and cell(row(html, "1"), "calls") == "1"
    session.refresh_from_db()
    shown = sum(int(cell(row(html, n), "input").replace(",", "")) for n in ("1", "2"))
    assert shown == session.usage_input_tokens


# ---------------------------------------------------------------------------
# The session list's cost column
# ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_lists_cost_bills_cache_reads_and_writes_at_their_prices(operator_client, priced):
    """A session that read a million tokens from the cache costs less than one that sent 200,000
    uncached: reads are billed at a tenth, writes at 1.25 times."""
    reader = usage_set(
        session_new(title="reader", model="claude-sonnet-4-6"), usage_cache_read_tokens=1_000_000
    )
    writer = usage_set(
        session_new(title="writer", model="claude-sonnet-4-6"), usage_cache_creation_tokens=100_000
    )
    sender = usage_set(session_new(title="sender", model="claude-sonnet-4-6"), usage_input_tokens=200_000)
    html = operator_client.get("/?sort=cost").content.decode()

    def cost(session: AgentSession) -> str:
        listed = html.split(f'id="session-row-{session.pk}"', 1)[1].split("</tr>", 1)[0]
        match = re.search(r'data-col="cost"[^>]*>([^<]*)<', listed)
        assert match
        return match.group(1)

    assert (cost(reader), cost(writer), cost(sender)) == ("$0.3000", "$0.3750", "$0.6000")
    order = re.findall(r'<tr id="session-row-([0-9a-f-]{36})"', html)
    assert order == [str(reader.pk), str(writer.pk), str(sender.pk)]
