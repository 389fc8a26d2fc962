"""A request's tools are stored once (`RequestPart`) and named by their hash in each call's
record; the record still rebuilds to the exact request."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from sessions_app import selectors
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import ModelCall, RequestPart
from sessions_app.services import steps

pytestmark = pytest.mark.django_db(transaction=True)


async def _turns(contents: list[str], **create) -> list[ModelCall]:
    session = await sync_to_async(engine_sessions.session_create)(owner=None, model="scripted", **create)
    for content in contents:
        await runner.turn_start(session_id=session.id, content=content)
        await runner.turns_wait_idle(timeout=60)
    return await sync_to_async(lambda: list(ModelCall.objects.filter(session_id=session.id)))()


async def test_the_tools_are_stored_once_for_every_step_of_every_session_that_has_them():
    calls = await _turns(["hello", "echo one", "tool read_notepad {}"])
    calls += await _turns(["another session"])
    assert len(calls) >= 5
    parts = await sync_to_async(lambda: list(RequestPart.objects.all()))()
    assert len(parts) == 1
    for call in calls:
        assert call.request["tools"] == {"$part": parts[0].sha256}
        body = await sync_to_async(selectors.model_call_request)(call=call)
        assert body["tools"] == json.loads(parts[0].text)
        assert await sync_to_async(selectors.model_call_request_verified)(call=call)
    # A record keeps what changes from step to step; the tools (~7 KB) are not in it.
    assert max(len(json.dumps(call.request)) for call in calls) < len(parts[0].text)


async def test_other_tools_are_another_part():
    tool = {"name": "lookup", "description": "Find it.", "input_schema": {"type": "object"}}
    await _turns(["hello"])
    (call,) = await _turns(["hello"], tools=[tool])
    assert await sync_to_async(RequestPart.objects.count)() == 2
    body = await sync_to_async(selectors.model_call_request)(call=call)
    assert body["tools"][-1]["name"] == "lookup"
    assert await sync_to_async(selectors.model_call_request_verified)(call=call)


def test_a_part_counts_as_stored_only_once_its_transaction_committed():
    parts = {"a" * 64: "[]"}
    with pytest.raises(RuntimeError), transaction.atomic():
        steps.request_parts_store(parts)
        raise RuntimeError("the call's write failed")
    assert not RequestPart.objects.exists()
    steps.request_parts_store(parts)  # not remembered: stored again
    assert RequestPart.objects.get().text == "[]"


def test_a_part_another_process_stored_is_not_stored_twice():
    RequestPart.objects.create(sha256="b" * 64, text='[{"name":"x"}]')
    steps.request_parts_store({"b" * 64: '[{"name":"x"}]'})  # not remembered here: the insert skips it
    assert RequestPart.objects.count() == 1


async def test_a_record_whose_part_is_missing_does_not_verify():
    (call, *_) = await _turns(["hello"])
    await sync_to_async(RequestPart.objects.all().delete)()
    body = await sync_to_async(selectors.model_call_request)(call=call)
    assert body["tools"] == call.request["tools"]  # the reference, left as it is
    assert not await sync_to_async(selectors.model_call_request_verified)(call=call)
