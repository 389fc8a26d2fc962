"""A recorded model call rebuilds to the exact request, checked by its SHA-256."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.engine import runner
from sessions_app.models import ModelCall

pytestmark = pytest.mark.django_db(transaction=True)


def keys_reversed(value: Any) -> Any:
    """The same JSON with every object's keys in another order (as PostgreSQL's jsonb returns it)."""
    if isinstance(value, dict):
        return {key: keys_reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [keys_reversed(item) for item in value]
    return value


async def recorded_call(connect) -> ModelCall:
    client = await connect()
    await client.create(system_prompt="You help.")
    await client.send({"type": "user.message", "content": "hello"})
    await client.until("turn.completed")
    await runner.turns_wait_idle(timeout=10)
    return await sync_to_async(ModelCall.objects.get)()


async def test_recorded_request_verifies(connect):
    call = await recorded_call(connect)
    assert await sync_to_async(selectors.model_call_request_verified)(call=call)


async def test_verification_does_not_depend_on_the_order_of_keys(connect):
    call = await recorded_call(connect)
    call.request = keys_reversed(call.request)
    assert await sync_to_async(selectors.model_call_request_verified)(call=call)


async def test_a_changed_request_does_not_verify(connect):
    call = await recorded_call(connect)
    call.request = {**call.request, "max_tokens": call.request["max_tokens"] + 1}
    assert not await sync_to_async(selectors.model_call_request_verified)(call=call)
