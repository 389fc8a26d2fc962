"""Lifetime of observations: TTL (`offload.ttl_seconds`), garbage collection at the start of
every turn, and the tool disappearing once nothing readable is left."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from memory_app.observations.models import Observation, ObservationChunk
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.observation_helpers import big_log, observations, tool_names, turn, use_fs_root

pytestmark = pytest.mark.django_db(transaction=True)


async def _offloading_session(
    connect: Any,
    fake_anthropic: FakeAnthropicServer,
    settings: Any,
    tmp_path: Path,
    session_settings: dict | None = None,
) -> Any:
    root = use_fs_root(settings, tmp_path)
    if not (root / "log").exists():
        (root / "log").write_text(big_log())
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), text("done"))
    client = await connect()
    created = await client.create(settings=session_settings or {})
    await turn(client)
    client.session_id = created["id"]
    return client


async def test_an_observation_expires_ttl_seconds_after_it_was_made(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    client = await _offloading_session(
        connect, fake_anthropic, settings, tmp_path, {"offload": {"ttl_seconds": 90}}
    )
    (observation,) = await observations(session_id=client.session_id)
    assert observation.expires_at - observation.created_at == timedelta(seconds=90)


async def test_default_ttl_is_one_hour(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    client = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    (observation,) = await observations(session_id=client.session_id)
    assert observation.expires_at - observation.created_at == timedelta(hours=1)


async def test_the_next_turn_drops_the_content_of_expired_observations(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    client = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    (observation,) = await observations(session_id=client.session_id)
    await sync_to_async(Observation.objects.filter(pk=observation.pk).update)(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    fake_anthropic.enqueue(text("hello"))
    await turn(client)
    # The row stays (a later read is told it expired); its content is gone.
    assert await observations(session_id=client.session_id) == [observation]
    assert not await sync_to_async(ObservationChunk.objects.filter(observation_id=observation.pk).exists)()


async def test_the_next_turn_keeps_live_observations_of_every_session(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    first = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    second = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    fake_anthropic.enqueue(text("hello"))
    await turn(second)
    assert len(await observations(session_id=first.session_id)) == 1
    assert len(await observations(session_id=second.session_id)) == 1


async def test_expired_observations_are_garbage_collected_whichever_session_starts_a_turn(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    first = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    second = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    await sync_to_async(Observation.objects.filter(session_id=first.session_id).update)(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    fake_anthropic.enqueue(text("hello"))
    await turn(second)
    (observation,) = await observations(session_id=first.session_id)
    assert not await sync_to_async(ObservationChunk.objects.filter(observation_id=observation.pk).exists)()


async def test_the_tool_stays_offered_once_the_turns_observations_expire(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "log").write_text(big_log())

    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), text("done"))
    client = await connect()
    await client.create(settings={"offload": {"ttl_seconds": 1, "scope": "session"}})
    await turn(client)
    assert "scratchpad_read" in tool_names(fake_anthropic.requests[1].body)
    time.sleep(1.1)
    fake_anthropic.enqueue(text("hello"))
    await turn(client)
    # The tool list does not change (issue 32); a read of the expired id says it expired.
    assert tool_names(fake_anthropic.requests[2].body) == tool_names(fake_anthropic.requests[1].body)


async def test_a_turns_start_sweeps_expired_content_at_most_every_gc_interval(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    """The sweep looks at every session's observations: it is not every turn's work. Within the
    interval an expired observation keeps its content (a read of it says "expired" all the
    same); the first turn after the interval drops it."""
    from memory_app.observations.hooks import OBSERVATION_HOOK

    client = await _offloading_session(connect, fake_anthropic, settings, tmp_path)
    (observation,) = await observations(session_id=client.session_id)
    settings.PALIMPSEST_OBSERVATIONS_GC_SECONDS = 3600.0
    OBSERVATION_HOOK._gc_last = time.monotonic()  # this process swept just now
    await sync_to_async(Observation.objects.filter(pk=observation.pk).update)(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    fake_anthropic.enqueue(text("not swept again"))
    await turn(client)
    chunks = ObservationChunk.objects.filter(observation_id=observation.pk)
    assert await sync_to_async(chunks.exists)()
    OBSERVATION_HOOK._gc_last = time.monotonic() - 3601  # an hour later
    fake_anthropic.enqueue(text("swept"))
    await turn(client)
    assert not await sync_to_async(chunks.exists)()
