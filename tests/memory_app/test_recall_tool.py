"""The `recall` tool through the agent websocket and the scripted model: a fact told in a
session's first turn is found after several compactions, and from a new session of the same
agent, never from another client's agent of that name; a session without an agent is offered
the tool once it has an archive; the result fits the room left."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.recall import prompts
from memory_app.recall.scripted import NOT_OFFERED_REPLY, NOTHING_FOUND
from memory_app.recall.tools import results_fit
from sessions_app import selectors
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.models import Archive, ModelCall
from tests.conftest import chat
from tests.sessions_app.conftest import NO_MEMORY

pytestmark = pytest.mark.django_db(transaction=True)

# About 900 tokens a message: a few turns cross a 3,000-token threshold (as test_compaction's).
FILLER = "palimpsest " * 300
SMALL: dict[str, Any] = {"context_window": 10_000, "compact_threshold": 0.3, "settings": NO_MEMORY}
FACT = "The spare key is under the blue flowerpot by the shed."


def answer(frames: list[dict]) -> str:
    return [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"]


def compactions(frames: list[dict]) -> int:
    return sum(1 for f in frames if f["type"] == "compaction.completed")


async def agent_session(client: Any, name: str = "helper", **fields: Any) -> dict:
    await client.send({"type": "agent.create", "name": name})
    reply = await client.recv()
    assert reply["type"] in ("agent.created", "error"), reply  # an existing agent is fine
    return await client.create(agent=name, **fields)


async def fill_until_compacted(client: Any, times: int) -> None:
    done = 0
    for index in range(30):
        done += compactions(await chat(client, f"request {index}: {FILLER}"))
        if done >= times:
            return
    raise AssertionError(f"only {done} compactions")


async def last_tools() -> list[str]:
    """The tools of the latest turn request."""

    def read() -> dict:
        call = ModelCall.objects.filter(purpose="turn").order_by("-started_at").first()
        assert call is not None
        return selectors.model_call_request(call=call)

    return [t["name"] for t in (await sync_to_async(read)()).get("tools", [])]


async def test_a_fact_from_the_first_turn_is_recalled_after_several_compactions_and_in_a_new_session(connect):
    client = await connect()
    await agent_session(client, **SMALL)
    await chat(client, FACT)
    await fill_until_compacted(client, 3)
    assert await sync_to_async(Archive.objects.count)() >= 3
    assert FACT in answer(await chat(client, "recall: spare key flowerpot"))
    await agent_session(client, **SMALL)
    assert FACT in answer(await chat(client, "recall: where is the spare key?"))


async def test_another_clients_agent_of_the_same_name_recalls_nothing_of_it(connect, make_token):
    mine = await connect()
    await agent_session(mine)
    await chat(mine, FACT)
    theirs = await connect(await make_token("someone-else"))
    await agent_session(theirs)
    assert answer(await chat(theirs, "recall: spare key flowerpot")) == NOTHING_FOUND


async def test_a_session_without_an_agent_is_offered_recall_once_it_has_an_archive(connect):
    client = await connect()
    await client.create(**SMALL)
    await chat(client, FACT)
    assert answer(await chat(client, "recall: anything")) == NOT_OFFERED_REPLY
    assert "recall" not in await last_tools()
    await fill_until_compacted(client, 1)
    assert FACT in answer(await chat(client, "recall: flowerpot"))
    assert "recall" in await last_tools()


async def test_a_query_without_words_is_a_tool_error_the_model_reads(connect):
    client = await connect()
    await agent_session(client)
    reply = answer(await chat(client, "recall: *** ---"))
    assert reply.startswith("The search failed:") and "plain words" in reply


async def test_a_result_over_the_offload_threshold_is_given_whole_not_offloaded(connect):
    """A reading tool that fits its result to the room: the offload rule leaves it, so the model
    reads the passages, not a placeholder to read again."""
    client = await connect()
    settings = {"offload": {"threshold_bytes": 64}}
    await agent_session(client, settings=settings)
    await chat(client, FACT)
    await agent_session(client, settings=settings)
    frames = await chat(client, "recall: spare key flowerpot")
    (result,) = [f for f in frames if f["type"] == "tool.result" and f["name"] == "recall"]
    assert "observation_id" not in result and FACT in json.dumps(result["content"])
    assert FACT in answer(frames)


def _hits(count: int, size: int) -> list[dict]:
    return [
        {
            "session_id": "s",
            "session_title": "",
            "at": "2026-01-01T00:00:00",
            "role": "user",
            "text": "w" * size,
        }
        for _ in range(count)
    ]


def test_a_result_that_fits_is_given_whole():
    hits = _hits(3, 100)
    assert results_fit(hits, 10_000) == {"results": hits}
    assert results_fit(hits, None) == {"results": hits}


def test_the_worst_hits_are_dropped_to_fit_the_room_and_the_result_says_so():
    hits = _hits(5, 1_000)
    room = estimate_json_tokens({"results": hits[:2]}) + 80
    fitted = results_fit(hits, room)
    assert fitted["results"] == hits[:2]
    assert fitted["note"] == prompts.DROPPED_NOTE.format(dropped=3)
    assert estimate_json_tokens(fitted) <= room


def test_a_single_hit_too_large_for_the_room_is_shortened():
    fitted = results_fit(_hits(2, 1_000), 120)
    (hit,) = fitted["results"]
    assert len(hit["text"]) < 1_000 and hit["text"].endswith("…")
    assert prompts.SHORTENED_NOTE in fitted["note"] and "1 more" in fitted["note"]
    assert estimate_json_tokens(fitted) <= 120
    assert json.dumps(fitted)  # plain JSON
