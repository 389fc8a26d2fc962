"""`/api/v1/sessions...` (PROTOCOL.md, "HTTP API v1"): the list with its filters and cursor
paging, one session's state, its update (as `session.update`), delete, end, and events."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.models import AgentSession
from tests.api.conftest import body, error

pytestmark = pytest.mark.django_db(transaction=True)


async def _ids(client: Any, query: str = "") -> list[str]:
    return [item["id"] for item in body(await client.get(f"/sessions{query}"))["items"]]


async def test_the_list_is_newest_first(api_client: Any) -> None:
    client = await api_client()
    made = [await client.session(title=f"s{i}") for i in range(3)]
    assert await _ids(client) == [str(s.pk) for s in reversed(made)]


async def test_the_list_filters_by_agent_status_and_title(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    of_agent = await client.session(title="Weekly Report", agent="writer")
    plain = await client.session(title="scratch")
    await client.post(f"/sessions/{plain.pk}/end")
    assert await _ids(client, "?agent=writer") == [str(of_agent.pk)]
    assert await _ids(client, "?agent=nobody") == []
    assert await _ids(client, "?status=ended") == [str(plain.pk)]
    assert await _ids(client, "?status=idle") == [str(of_agent.pk)]
    assert await _ids(client, "?q=weekly") == [str(of_agent.pk)]
    assert await _ids(client, "?q=report&status=ended") == []


async def test_an_unknown_status_is_400(api_client: Any) -> None:
    client = await api_client()
    assert error(await client.get("/sessions?status=sleeping")) == (400, "invalid_value")


async def test_cursor_paging_is_stable_under_inserts(api_client: Any) -> None:
    client = await api_client()
    made = [await client.session(title=f"s{i}") for i in range(5)]
    first = body(await client.get("/sessions?limit=2"))
    assert [i["id"] for i in first["items"]] == [str(made[4].pk), str(made[3].pk)]
    # Sessions created between two pages neither shift the next page nor appear in it.
    await client.session(title="new-1")
    await client.session(title="new-2")
    second = body(await client.get(f"/sessions?limit=2&cursor={first['next']}"))
    assert [i["id"] for i in second["items"]] == [str(made[2].pk), str(made[1].pk)]
    third = body(await client.get(f"/sessions?limit=2&cursor={second['next']}"))
    assert [i["id"] for i in third["items"]] == [str(made[0].pk)]
    assert third["next"] is None


async def test_a_limit_over_100_or_a_foreign_cursor_is_400(api_client: Any) -> None:
    client = await api_client()
    assert error(await client.get("/sessions?limit=101")) == (400, "invalid_value")
    assert error(await client.get("/sessions?limit=0")) == (400, "invalid_value")
    assert error(await client.get("/sessions?cursor=not-a-cursor")) == (400, "invalid_value")
    assert error(await client.get("/sessions?cursor=WzEsMl0")) == (400, "invalid_value")  # [1,2]


async def test_get_returns_the_public_state(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(title="t", context_window=50_000)
    state = body(await client.get(f"/sessions/{session.pk}"))
    assert (state["id"], state["title"], state["context_window"], state["status"]) == (
        str(session.pk),
        "t",
        50_000,
        "idle",
    )
    assert state["agent"] is None and state["depth"] == 0


async def test_a_malformed_or_unknown_id_is_404(api_client: Any) -> None:
    client = await api_client()
    assert error(await client.get("/sessions/nope")) == (404, "session_not_found")
    assert error(await client.get("/sessions/00000000-0000-0000-0000-000000000000")) == (
        404,
        "session_not_found",
    )


async def test_patch_updates_as_session_update(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(title="before")
    response = await client.patch(
        f"/sessions/{session.pk}",
        {"title": "after", "compact_threshold": 0.5, "settings": {"max_steps_per_turn": 7}},
    )
    state = body(response)
    assert response.status_code == 200
    assert (state["title"], state["compact_threshold"], state["settings"]["max_steps_per_turn"]) == (
        "after",
        0.5,
        7,
    )
    # Merged: the other settings stay.
    assert state["settings"]["notepad"]["enabled"] is True


async def test_patch_is_all_or_nothing(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(title="kept")
    response = await client.patch(f"/sessions/{session.pk}", {"title": "changed", "context_window": 5})
    assert error(response) == (400, "invalid_value")
    response = await client.patch(f"/sessions/{session.pk}", {"title": "changed", "settings": {"nope": 1}})
    assert error(response) == (400, "invalid_settings")
    stored = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert stored.title == "kept"


async def test_patch_refuses_a_field_it_does_not_take_and_a_wrong_type(api_client: Any) -> None:
    client = await api_client()
    session = await client.session(title="kept")
    status, code = error(await client.patch(f"/sessions/{session.pk}", {"title": "x", "model": "m"}))
    assert (status, code) == (400, "invalid_value")
    assert "model" in body(await client.patch(f"/sessions/{session.pk}", {"model": "m"}))["message"]
    assert error(await client.patch(f"/sessions/{session.pk}", {"title": 5})) == (400, "invalid_value")
    assert error(await client.patch(f"/sessions/{session.pk}", ["title"])) == (400, "invalid_value")
    response = await client.call(
        "patch", f"/sessions/{session.pk}", None, data="{not json", content_type="application/json"
    )
    assert error(response) == (400, "invalid_value")
    stored = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert stored.title == "kept"


async def test_a_body_over_the_upload_limit_is_413_json(api_client: Any, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    client = await api_client()
    session = await client.session(title="kept")
    response = await client.patch(f"/sessions/{session.pk}", {"title": "x" * 2_000})
    assert error(response) == (413, "too_large")
    stored = await sync_to_async(AgentSession.objects.get)(pk=session.pk)
    assert stored.title == "kept"


async def test_delete_removes_the_session(api_client: Any) -> None:
    client = await api_client()
    session = await client.session()
    response = await client.delete(f"/sessions/{session.pk}")
    assert response.status_code == 204
    assert not await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()
    assert error(await client.get(f"/sessions/{session.pk}")) == (404, "session_not_found")


async def test_delete_while_a_turn_runs_is_409(api_client: Any) -> None:
    client = await api_client()
    session = await client.session()
    await sync_to_async(services.turn_begin)(session_id=session.pk, content="working")
    assert error(await client.delete(f"/sessions/{session.pk}")) == (409, "turn_in_progress")
    assert await sync_to_async(AgentSession.objects.filter(pk=session.pk).exists)()


async def test_end_ends_the_session_then_409(api_client: Any) -> None:
    client = await api_client()
    session = await client.session()
    response = await client.post(f"/sessions/{session.pk}/end")
    assert (response.status_code, body(response)["status"]) == (200, "ended")
    assert error(await client.post(f"/sessions/{session.pk}/end")) == (409, "session_ended")
    events = body(await client.get(f"/sessions/{session.pk}/events"))["items"]
    assert [e["type"] for e in events][-1] == "session.ended"


async def test_events_after_since_seq_in_pages(api_client: Any) -> None:
    client = await api_client()
    session = await client.session()
    for title in ("a", "b", "c", "d"):
        await client.patch(f"/sessions/{session.pk}", {"title": title})
    everything = body(await client.get(f"/sessions/{session.pk}/events"))
    seqs = [e["seq"] for e in everything["items"]]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 4
    assert everything["next"] is None
    after = body(await client.get(f"/sessions/{session.pk}/events?since_seq=1&limit=2"))
    assert [e["seq"] for e in after["items"]] == [2, 3]
    rest = body(await client.get(f"/sessions/{session.pk}/events?limit=2&cursor={after['next']}"))
    assert [e["seq"] for e in rest["items"]] == seqs[3:5]
    assert all(e["session_id"] == str(session.pk) for e in everything["items"])
    assert error(await client.get(f"/sessions/{session.pk}/events?since_seq=-1")) == (400, "invalid_value")
