"""`/api/v1/agents...` (PROTOCOL.md, "HTTP API v1"; docs/api.md): create, list, get, update
(instructions as a new version, model, settings), the versions, delete."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.models import Agent, AgentSession
from tests.api.conftest import body, error

pytestmark = pytest.mark.django_db(transaction=True)


async def test_create_returns_201_and_the_agent_state(api_client: Any) -> None:
    client = await api_client()
    response = await client.post("/agents", {"name": "writer", "system_prompt": "Write well."})
    agent = body(response)
    assert response.status_code == 201
    assert (agent["name"], agent["instructions"], agent["versions"]) == (
        "writer",
        "Write well.",
        {"instructions": 1, "learned": 0},
    )
    assert body(await client.get("/agents/writer")) == agent


async def test_create_refuses_a_taken_name_a_bad_name_and_bad_settings(api_client: Any) -> None:
    client = await api_client()
    await client.post("/agents", {"name": "writer"})
    assert error(await client.post("/agents", {"name": "writer"})) == (409, "agent_exists")
    assert error(await client.post("/agents", {"name": "Bad Name"})) == (400, "invalid_value")
    assert error(await client.post("/agents", {"name": "a", "settings": {"nope": 1}})) == (
        400,
        "invalid_settings",
    )
    assert error(await client.post("/agents", {"name": "a", "owner": "x"})) == (400, "invalid_value")
    assert error(await client.post("/agents", {})) == (400, "invalid_value")
    assert await sync_to_async(Agent.objects.count)() == 1


async def test_the_same_name_is_free_for_another_client(api_client: Any) -> None:
    first, second = await api_client(), await api_client()
    assert (await first.post("/agents", {"name": "writer"})).status_code == 201
    assert (await second.post("/agents", {"name": "writer"})).status_code == 201


async def test_list_pages_by_name(api_client: Any) -> None:
    client = await api_client()
    for name in ("c", "a", "b"):
        await client.agent(name)
    first = body(await client.get("/agents?limit=2"))
    assert [a["name"] for a in first["items"]] == ["a", "b"]
    second = body(await client.get(f"/agents?limit=2&cursor={first['next']}"))
    assert ([a["name"] for a in second["items"]], second["next"]) == (["c"], None)


async def test_patch_instructions_makes_a_new_version_listed_newest_first(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer", system_prompt="v1")
    agent = body(await client.patch("/agents/writer", {"system_prompt": "v2"}))
    assert (agent["instructions"], agent["versions"]["instructions"]) == ("v2", 2)
    versions = body(await client.get("/agents/writer/versions?part=instructions"))
    assert [(v["version"], v["content"]) for v in versions["items"]] == [(2, "v2"), (1, "v1")]
    assert versions["items"][0]["author"] == f"client:{client.token.name}"
    paged = body(await client.get("/agents/writer/versions?limit=1"))
    rest = body(await client.get(f"/agents/writer/versions?limit=1&cursor={paged['next']}"))
    assert [v["version"] for v in paged["items"] + rest["items"]] == [2, 1]
    assert body(await client.get("/agents/writer/versions?part=learned"))["items"] == []
    assert error(await client.get("/agents/writer/versions?part=skill")) == (400, "invalid_value")


async def test_patch_model_and_settings_merge_into_the_agents_own(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer", settings={"max_steps_per_turn": 5})
    agent = body(
        await client.patch(
            "/agents/writer", {"model": "claude-haiku-4-5", "settings": {"notepad": {"enabled": False}}}
        )
    )
    assert agent["model"] == "claude-haiku-4-5"
    assert agent["settings"] == {"max_steps_per_turn": 5, "notepad": {"enabled": False}}
    # New sessions of it start from them.
    session = await client.session(agent="writer")
    assert (
        session.model,
        session.settings["notepad"]["enabled"],
        session.settings["max_steps_per_turn"],
    ) == (
        "claude-haiku-4-5",
        False,
        5,
    )


async def test_patch_is_all_or_nothing(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer", system_prompt="kept")
    response = await client.patch(
        "/agents/writer", {"system_prompt": "new", "settings": {"max_steps_per_turn": 0}}
    )
    assert error(response) == (400, "invalid_settings")
    response = await client.patch("/agents/writer", {"system_prompt": "new", "model": "m" * 101})
    assert error(response) == (400, "invalid_value")
    assert error(await client.patch("/agents/writer", {"name": "other"})) == (400, "invalid_value")
    agent = body(await client.get("/agents/writer"))
    assert (agent["instructions"], agent["versions"]["instructions"], agent["settings"]) == ("kept", 1, {})


async def test_delete_takes_the_agent_with_its_sessions(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    ended = await client.session(agent="writer")
    await client.post(f"/sessions/{ended.pk}/end")
    idle = await client.session(agent="writer")
    other = await client.session()
    assert (await client.delete("/agents/writer")).status_code == 204
    assert error(await client.get("/agents/writer")) == (404, "agent_not_found")
    left = await sync_to_async(lambda: set(AgentSession.objects.values_list("pk", flat=True)))()
    assert left == {other.pk} and ended.pk not in left and idle.pk not in left


async def test_delete_while_a_session_of_it_runs_is_409_and_deletes_nothing(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    ended = await client.session(agent="writer")
    await client.post(f"/sessions/{ended.pk}/end")
    running = await client.session(agent="writer")
    await sync_to_async(services.turn_begin)(session_id=running.pk, content="working")
    assert error(await client.delete("/agents/writer")) == (409, "turn_in_progress")
    assert (await client.get("/agents/writer")).status_code == 200
    assert await sync_to_async(AgentSession.objects.filter(pk=ended.pk).exists)()
