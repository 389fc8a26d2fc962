"""`/metrics` (issue 36 item 6; docs/operations.md): Prometheus's scrape after real turns shows
what happened (turns, model calls and their latency, tokens, cost, compactions, tool errors,
budget stops) and the database's state (sessions by status, the cache read share); a staff login
or the configured token only. The multiprocess case (a second process's counts summed) runs
against a real daphne at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from sessions_app import services
from sessions_app.models import AgentSession, SessionStatus
from tests.dashboard.conftest import chat, session_new
from tests.fake_anthropic import text, tool_use
from tests.servers import BASE_DIR, Daphne, manage, server_env
from tests.sessions_app.test_approvals import _asked_step
from tests.sessions_app.test_budgets import budget
from tests.sessions_app.test_usage import PRICES

TOKEN = "metrics-token-for-tests"


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("op", password="pw", is_staff=True)


@pytest.fixture
def operator_client(client: Client, operator: Any) -> Client:
    client.force_login(operator)
    return client


def samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def scrape(client: Client, **headers: str) -> dict:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return samples(response.content.decode())


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


def grew(before: dict, after: dict, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


# ---------------------------------------------------------------------------
# What a scrape shows (one process: its own registry)
# ---------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_scrape_after_a_scripted_turn_shows_its_counts(operator_client: Client) -> None:
    before = scrape(operator_client)
    session = session_new()
    chat(session.pk, "echo hello")
    after = scrape(operator_client)
    assert grew(before, after, "palimpsest_turns_total", stop_reason="end_turn") == 1
    ok = {"provider": "scripted", "purpose": "turn"}
    assert grew(before, after, "palimpsest_model_calls_total", outcome="ok", **ok) == 1
    assert grew(before, after, "palimpsest_model_call_duration_seconds_count", **ok) == 1
    row = AgentSession.objects.get(pk=session.pk)
    assert (
        grew(before, after, "palimpsest_input_tokens_total", provider="scripted", kind="uncached")
        == row.usage_input_tokens
        > 0
    )
    assert (
        grew(before, after, "palimpsest_output_tokens_total", provider="scripted")
        == row.usage_output_tokens
        > 0
    )
    # State, from the database at the scrape.
    idle = AgentSession.objects.filter(status=SessionStatus.IDLE).count()
    assert value(after, "palimpsest_sessions", status="idle") == idle >= 1
    assert value(after, "palimpsest_sessions", status="ended") == 0  # every status is there
    assert (("palimpsest_cache_read_share", ()) in after) is True


@pytest.mark.django_db(transaction=True)
def test_costs_cache_reads_and_tool_errors_are_counted(
    operator_client: Client, fake_anthropic: Any, settings: Any
) -> None:
    settings.PALIMPSEST_MODEL_PRICES = PRICES
    before = scrape(operator_client)
    fake_anthropic.enqueue(tool_use("no_such_tool", {}), text("That tool does not exist."))
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "use a tool")
    fake_anthropic.enqueue(text("Again."))
    chat(session.pk, "and again, cached")
    after = scrape(operator_client)
    assert grew(before, after, "palimpsest_tool_errors_total", tool="no_such_tool") == 1
    anthropic = {"provider": "anthropic", "purpose": "turn"}
    assert grew(before, after, "palimpsest_model_calls_total", outcome="ok", **anthropic) == 3
    assert grew(before, after, "palimpsest_input_tokens_total", provider="anthropic", kind="cache_read") > 0
    assert grew(before, after, "palimpsest_cost_usd_total", provider="anthropic") > 0
    share = value(after, "palimpsest_cache_read_share")
    assert 0 < share < 1


@pytest.mark.django_db(transaction=True)
def test_budget_stops_and_compactions_are_counted(operator_client: Client) -> None:
    before = scrape(operator_client)
    stopped = session_new(settings={"budget": {"max_input_tokens": 0}})
    chat(stopped.pk, "echo stopped")
    compacted = session_new(context_window=4000, compact_threshold=0.5)
    for index in range(6):
        chat(compacted.pk, f"message {index} " + "filler words " * 40)
    after = scrape(operator_client)
    assert grew(before, after, "palimpsest_budget_stops_total", limit="max_input_tokens") == 1
    assert grew(before, after, "palimpsest_turns_total", stop_reason="budget_reached") == 1
    completed = {"trigger": "threshold", "kind": "history", "outcome": "completed"}
    assert grew(before, after, "palimpsest_compactions_total", **completed) >= 1
    summary = {"provider": "scripted", "purpose": "summary", "outcome": "ok"}
    assert grew(before, after, "palimpsest_model_calls_total", **summary) >= 1
    budget(stopped, max_input_tokens=None)


# ---------------------------------------------------------------------------
# Who may scrape
# ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_without_a_token_configured_only_staff_may_scrape(
    client: Client, operator: Any, django_user_model: Any, settings: Any
) -> None:
    settings.PALIMPSEST_METRICS_TOKEN = ""
    response = client.get("/metrics")
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer anything"}).status_code == 401
    plain = django_user_model.objects.create_user("plain", password="pw", is_staff=False)
    client.force_login(plain)
    assert client.get("/metrics").status_code == 403
    client.force_login(operator)
    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_the_configured_token_lets_a_scraper_in(client: Client, operator: Any, settings: Any) -> None:
    settings.PALIMPSEST_METRICS_TOKEN = TOKEN
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/metrics", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
    for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer"):
        response = client.get("/metrics", headers={"Authorization": wrong})
        assert response.status_code == 401, wrong
    assert client.get("/metrics").status_code == 401
    client.force_login(operator)
    assert client.get("/metrics").status_code == 200  # staff, without the token
    assert client.post("/metrics").status_code == 405


# ---------------------------------------------------------------------------
# Multiprocess: daphne and a second process write to one directory; a scrape sums them
# ---------------------------------------------------------------------------
async def _scripted_turn(port: int, token: str) -> None:
    from websockets.asyncio.client import connect

    async with connect(
        f"ws://127.0.0.1:{port}/ws/agent/", additional_headers={"Authorization": f"Bearer {token}"}
    ) as ws:
        await ws.send(json.dumps({"type": "session.create"}))
        await ws.recv()
        await ws.send(json.dumps({"type": "user.message", "content": "echo counted"}))
        while json.loads(await ws.recv())["type"] != "turn.completed":
            pass


def _scrape_url(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


async def test_a_second_process_in_the_multiprocess_directory_is_summed(tmp_path: Path) -> None:
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    env = server_env(
        PALIMPSEST_SQLITE_PATH=str(tmp_path / "metrics.sqlite3"),
        PROMETHEUS_MULTIPROC_DIR=str(multiproc),
        PALIMPSEST_METRICS_TOKEN=TOKEN,
    )
    manage("migrate", "--noinput", env=env)
    token = manage("create_agent_token", "metrics", env=env).strip().splitlines()[-1]
    with Daphne(env, tmp_path / "daphne.log") as server:
        await _scripted_turn(server.port, token)
        # Another process (another daphne would do the same) counts into the same directory.
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from sessions_app.common import metrics\n"
                "metrics.turn_ended(stop_reason='end_turn')\n"
                "metrics.budget_stopped(limit='max_cost_usd')\n",
            ],
            cwd=BASE_DIR,
            env=env,
            check=True,
            timeout=60,
        )
        url = f"http://127.0.0.1:{server.port}/metrics"
        status, body = _scrape_url(url, TOKEN)
        assert status == 200
        assert _scrape_url(url, None)[0] == 401
        assert _scrape_url(url, "wrong")[0] == 401
    scraped = samples(body)
    assert value(scraped, "palimpsest_turns_total", stop_reason="end_turn") == 2  # daphne's and the other's
    assert value(scraped, "palimpsest_budget_stops_total", limit="max_cost_usd") == 1
    assert (
        value(scraped, "palimpsest_model_calls_total", provider="scripted", purpose="turn", outcome="ok") == 1
    )
    assert value(scraped, "palimpsest_sessions", status="idle") == 1
    assert len(list(multiproc.iterdir())) >= 2  # one file set per process


def test_a_metric_that_cannot_be_counted_is_logged_not_raised(tmp_path: Path) -> None:
    # A multiprocess directory that does not exist: prometheus-client cannot open its file.
    env = server_env(PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "missing"))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging; logging.basicConfig()\n"
            "from sessions_app.common import metrics\n"
            "metrics.turn_ended(stop_reason='end_turn')\n"
            "print('went on')\n",
        ],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "went on"
    assert "could not be counted (turn_ended)" in done.stderr


@pytest.mark.django_db(transaction=True)
def test_the_approvals_waiting_are_a_gauge(operator_client: Client) -> None:
    """`palimpsest_approvals_pending`: the calls waiting for an answer now, across sessions; an
    answered one is not counted."""
    assert value(scrape(operator_client), "palimpsest_approvals_pending") == 0
    session = session_new()
    turn = services.turn_begin(session_id=session.pk, content="ask me", holder=uuid.uuid4())
    _asked_step(session.pk, turn.id, ("toolu_one", "pending"), ("toolu_two", "pending"))
    assert value(scrape(operator_client), "palimpsest_approvals_pending") == 2
    services.tool_call_approval_answer(
        session_id=session.pk, tool_use_id="toolu_one", approved=False, author="operator:test"
    )
    assert value(scrape(operator_client), "palimpsest_approvals_pending") == 1
