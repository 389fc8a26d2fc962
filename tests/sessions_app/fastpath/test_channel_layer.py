"""The single-process channel layer cleans expired messages and memberships at most once per
`clean_interval`, not on every event (at N connections each cleaning walks all N), and still
cleans: a channel nobody read past the expiry leaves its groups."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer
from django.conf import settings

from sessions_app.fastpath.channel_layer import ThrottledInMemoryChannelLayer


def test_the_service_uses_it_without_redis():
    if settings.REDIS_URL:
        pytest.skip("REDIS_URL is set: the Redis layer is used")
    assert isinstance(get_channel_layer(), ThrottledInMemoryChannelLayer)


async def _two_members(layer: ThrottledInMemoryChannelLayer) -> tuple[str, str]:
    reader, idle = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("session", reader)
    await layer.group_add("session", idle)
    return reader, idle


async def test_within_the_interval_nothing_is_cleaned():
    layer = ThrottledInMemoryChannelLayer(expiry=0.01, clean_interval=3600)
    reader, idle = await _two_members(layer)
    await layer.group_send("session", {"type": "first"})  # cleans once (nothing to clean)
    assert (await layer.receive(reader))["type"] == "first"
    await asyncio.sleep(0.05)  # `idle`'s message has expired, unread
    await layer.group_send("session", {"type": "second"})
    assert (await layer.receive(reader))["type"] == "second"
    assert idle in layer.groups["session"]
    assert (await layer.receive(idle))["type"] == "first"  # an expired message, not yet dropped


async def test_after_the_interval_an_unread_channel_is_dropped_from_its_groups():
    layer = ThrottledInMemoryChannelLayer(expiry=0.01, clean_interval=0.05)
    reader, idle = await _two_members(layer)
    await layer.group_send("session", {"type": "first"})
    assert (await layer.receive(reader))["type"] == "first"
    await asyncio.sleep(0.2)  # past the expiry and the interval
    await layer.group_send("session", {"type": "second"})
    assert (await layer.receive(reader))["type"] == "second"
    assert idle not in layer.groups["session"]
    assert idle not in layer.channels  # its expired message is gone with it


async def test_a_group_left_empty_by_the_cleaning_is_deleted():
    layer = ThrottledInMemoryChannelLayer(expiry=0.01, clean_interval=0.05)
    idle = await layer.new_channel()
    await layer.group_add("session.gone", idle)
    await layer.group_send("session.gone", {"type": "unread"})
    await asyncio.sleep(0.2)  # past the expiry and the interval
    await layer.group_send("other", {"type": "cleans"})
    assert "session.gone" not in layer.groups


async def test_a_group_send_reaches_every_member_past_a_full_one_with_its_own_copy():
    layer = ThrottledInMemoryChannelLayer(capacity=1)
    full, reader = await layer.new_channel(), await layer.new_channel()
    for channel in (full, reader):
        await layer.group_add("session", channel)
    await layer.send(full, {"type": "filler"})  # `full` is at its capacity
    message = {"type": "event", "payload": {"n": 1}}
    await layer.group_send("session", message)
    received = await layer.receive(reader)
    assert received == message and received is not message  # a copy of its own
    assert (await layer.receive(full))["type"] == "filler"  # the event was dropped for it only
    await layer.group_send("nobody", {"type": "event"})  # an unknown group: nothing, no error
