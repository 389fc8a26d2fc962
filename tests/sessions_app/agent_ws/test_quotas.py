"""Per-token quotas: sessions a minute (counted in the database), frames a second, open connections
(per process)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.utils import timezone

from sessions_app.agent_ws import quotas
from sessions_app.agent_ws.quotas import CLOSE_TOO_MANY_CONNECTIONS, RateLimiter
from sessions_app.models import AgentSession

pytestmark = pytest.mark.django_db(transaction=True)


async def test_frames_over_the_rate_get_rate_limited_with_their_request_id(connect, settings):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 5
    client = await connect()
    for n in range(8):
        await client.send({"type": "session.get", "request_id": n})
    # The refusals are answered as the frames arrive, so they may come before earlier answers.
    replies = sorted([await client.recv() for _ in range(8)], key=lambda r: r["request_id"])
    assert [r["code"] for r in replies] == ["not_attached"] * 5 + ["rate_limited"] * 3
    assert [r["request_id"] for r in replies] == list(range(8))
    assert "5 a second" in replies[-1]["message"]
    await asyncio.sleep(0.5)  # the allowance refills evenly over the second
    await client.send({"type": "session.get"})
    assert (await client.recv())["code"] == "not_attached"
    await client.close()


async def test_bad_frames_count_too(connect, settings):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 2
    client = await connect()
    for _ in range(3):
        await client.send("{not json")
    assert sorted([(await client.recv())["code"] for _ in range(3)]) == [
        "invalid_json",
        "invalid_json",
        "rate_limited",
    ]
    await client.close()


async def test_the_frame_rate_is_per_token(connect, make_token, settings):
    settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND = 1
    raw = await make_token("busy")
    one, two = await connect(raw), await connect(raw)
    other = await connect(await make_token("calm"))
    await one.send({"type": "session.get"})
    await two.send({"type": "session.get"})
    await other.send({"type": "session.get"})
    assert (await one.recv())["code"] == "not_attached"
    assert (await two.recv())["code"] == "rate_limited"
    assert (await other.recv())["code"] == "not_attached"
    for client in (one, two, other):
        await client.close()


async def test_sessions_over_the_rate_are_refused_and_not_stored(connect, settings):
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 2
    client = await connect()
    await client.create()
    await client.create()
    await client.send({"type": "session.create", "request_id": "third"})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("rate_limited", "third")
    assert await sync_to_async(AgentSession.objects.count)() == 2
    await client.close()


async def test_the_sessions_quota_is_counted_in_the_database_for_every_connection(
    connect, make_token, settings
):
    # Two connections of one token (in one process or two: the count is the database's).
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 2
    raw = await make_token()
    one, two = await connect(raw), await connect(raw)
    await one.create()
    await two.create()
    quotas.quotas_reset()  # what a process keeps in memory plays no part
    await one.send({"type": "session.create", "request_id": "third"})
    reply = await one.recv()
    assert (reply["code"], reply["request_id"]) == ("rate_limited", "third")
    assert "at most 2 a minute" in reply["message"]
    assert await sync_to_async(AgentSession.objects.count)() == 2
    for client in (one, two):
        await client.close()


async def test_sessions_older_than_a_minute_do_not_count(connect, settings):
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 1
    client = await connect()
    await client.create()
    await sync_to_async(AgentSession.objects.update)(created_at=timezone.now() - timedelta(seconds=61))
    assert (await client.create())["id"]
    await client.close()


async def test_an_invalid_session_create_does_not_spend_the_allowance(connect, settings):
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 1
    client = await connect()
    await client.send({"type": "session.create", "model": ""})
    assert (await client.recv())["code"] == "invalid_value"
    assert (await client.create())["id"]
    await client.close()


async def test_connections_over_the_limit_are_closed_with_4429(connect, make_token, settings):
    settings.PALIMPSEST_QUOTA_CONNECTIONS = 2
    raw = await make_token()
    one, two, three = await connect(raw), await connect(raw), await connect(raw)
    assert await three.ws.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": CLOSE_TOO_MANY_CONNECTIONS,
    }
    assert (await two.create())["id"]
    await one.close()
    again = await connect(raw)
    assert (await again.create())["id"]
    await two.close()
    await again.close()


def test_the_defaults_let_one_token_open_500_sessions_at_once():
    # 500 connections, each sending session.create and then user.message within a second.
    limiter_frames = RateLimiter(period_seconds=quotas.FRAMES_PERIOD_SECONDS)
    frames = django_settings.PALIMPSEST_QUOTA_FRAMES_PER_SECOND
    assert all(limiter_frames.allow(1, limit=frames) for _ in range(1000))
    # Sessions are counted in the database: any 500 within a minute.
    assert django_settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE >= 500
    assert quotas.connection_allowed(open_connections=500)


def test_the_counters_forget_idle_tokens_and_are_bounded():
    now = [0.0]
    limiter = RateLimiter(period_seconds=1.0, maxsize=100, clock=lambda: now[0])
    for token_id in range(1000):
        limiter.allow(token_id, limit=10)
    assert len(limiter) == 100
    now[0] = 5.0
    limiter.allow(1, limit=10)
    assert len(limiter) == 1


def test_a_limit_of_zero_switches_the_quota_off():
    limiter = RateLimiter(period_seconds=1.0)
    assert all(limiter.allow(1, limit=0) for _ in range(10_000))
    assert len(limiter) == 0
