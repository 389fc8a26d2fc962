"""The Python client's HTTP calls (issue 36 item 8: PROTOCOL.md "HTTP API v1"), against a real
daphne serving the project: the same token as the websocket, the API's errors raised as the
client's exceptions with their codes and HTTP status."""

from __future__ import annotations

import pytest

from palimpsest_client import InvalidRequest, SessionEnded, SessionNotFound, connect
from palimpsest_client.errors import ProtocolError
from palimpsest_client.http import HttpApi, HttpError, api_url_from_ws
from tests.servers import Daphne, manage


def test_the_api_url_is_the_websockets_server_under_api_v1():
    assert api_url_from_ws("ws://127.0.0.1:8000/ws/agent/") == "http://127.0.0.1:8000/api/v1/"
    assert api_url_from_ws("wss://example.test/ws/agent/") == "https://example.test/api/v1/"


async def test_sessions_are_listed_page_after_page_newest_first(daphne: Daphne, token: str):
    async with connect(daphne.ws_url, token) as client:
        ids = [(await client.create_session(title=f"listed {n}")).id for n in range(3)]
        await client.create_session(title="other")
        listed = await client.list_sessions(q="listed")
        assert [s["id"] for s in listed] == ids[::-1]
        page = await client.api.list_sessions(q="listed", limit=2)
        assert [s["id"] for s in page["items"]] == ids[:0:-1] and page["next"]
        rest = await client.api.list_sessions(q="listed", limit=2, cursor=page["next"])
        assert [s["id"] for s in rest["items"]] == ids[:1] and rest["next"] is None


async def test_update_over_http_and_over_the_websocket_and_a_bad_value_changes_nothing(
    daphne: Daphne, token: str
):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="before")
        state = await client.update_session(session.id, title="after", settings={"max_steps_per_turn": 7})
        assert state["title"] == "after" and state["settings"]["max_steps_per_turn"] == 7
        updated = await session.update(compact_threshold=0.6)
        assert updated["compact_threshold"] == 0.6 and updated["title"] == "after"
        with pytest.raises(InvalidRequest) as refused:
            await client.update_session(session.id, title="never", compact_threshold=7)
        assert refused.value.code == "invalid_value" and refused.value.status == 400  # type: ignore[attr-defined]
        with pytest.raises(InvalidRequest):
            await session.update(title="never", settings={"max_steps_per_turn": -1})
        state = await client.api.get_session(session.id)
        assert (state["title"], state["compact_threshold"]) == ("after", 0.6)


async def test_end_events_and_delete_over_http(daphne: Daphne, token: str):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="to end")
        async for _ in session.send("echo one"):
            pass
        page = await client.api.events(session.id, since_seq=0)
        types = [e["type"] for e in page["items"]]
        assert types[0] == "user.message" and types[-1] == "turn.completed"
        later = await client.api.events(session.id, since_seq=page["items"][-2]["seq"])
        assert [e["type"] for e in later["items"]] == ["turn.completed"]

        state = await client.end_session(session.id)
        assert state["status"] == "ended"
        with pytest.raises(SessionEnded):
            async for _ in session.send("echo two"):
                pass
        await client.api.delete_session(session.id)
        with pytest.raises(SessionNotFound) as gone:
            await client.api.get_session(session.id)
        assert gone.value.status == 404  # type: ignore[attr-defined]


async def test_another_clients_session_is_not_found_and_a_wrong_token_is_refused(
    daphne: Daphne, token: str, server_env_sqlite: dict[str, str]
):
    other = manage("create_agent_token", "someone-else", env=server_env_sqlite).strip().splitlines()[-1]
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="mine")
    theirs = HttpApi(api_url_from_ws(daphne.ws_url), other)
    with pytest.raises(SessionNotFound):
        await theirs.get_session(session.id)
    with pytest.raises(SessionNotFound):
        await theirs.end_session(session.id)
    assert (await theirs.list_sessions())["items"] == []
    wrong = HttpApi(api_url_from_ws(daphne.ws_url), "not-a-token")
    with pytest.raises(ProtocolError) as refused:
        await wrong.list_sessions()
    assert refused.value.status == 401  # type: ignore[attr-defined]


async def test_an_unreachable_server_is_an_http_error():
    api = HttpApi("http://127.0.0.1:9/api/v1/", "token", timeout=5)
    with pytest.raises(HttpError, match="cannot reach"):
        await api.list_sessions()
