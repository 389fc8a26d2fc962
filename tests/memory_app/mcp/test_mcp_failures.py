"""A server that crashes, hangs or answers with an error costs the model one tool error, never a
failed turn; a server that failed is restarted and its next call works."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.mcp.manager import SERVICE_SCOPE, mcp_manager
from tests.memory_app.mcp.support import call, create, result, script_config, text_of, turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def flaky(settings: Any) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"flaky": script_config("flaky")}


def restarts() -> int:
    manager = mcp_manager(create=False)
    assert manager is not None
    status = manager.status(SERVICE_SCOPE, "flaky")
    assert status is not None
    return status.restarts


async def test_a_crash_costs_one_tool_error_and_the_next_call_works(connect: Any, flaky: None) -> None:
    client = await connect()
    await create(client)
    frames = await turn(client, call("mcp__flaky__crash", {}))
    crashed = result(frames)
    assert crashed["is_error"] is True
    assert "The MCP server flaky failed during this call" in text_of(crashed)
    assert "being restarted" in text_of(crashed)
    assert frames[-1]["stop_reason"] == "end_turn"
    assert not [f for f in frames if f["type"] == "error"]
    echoed = result(await turn(client, call("mcp__flaky__echo", {"text": "back again"})))
    assert (echoed["is_error"], text_of(echoed)) == (False, "back again")
    assert restarts() == 1


async def test_a_hanging_call_times_out_into_a_tool_error(connect: Any, flaky: None, settings: Any) -> None:
    settings.PALIMPSEST_MCP_CALL_TIMEOUT_SECONDS = 2.0
    client = await connect()
    await create(client)
    hung = result(await turn(client, call("mcp__flaky__hang", {})))
    assert hung["is_error"] is True and "no answer within 2 seconds" in text_of(hung)
    echoed = result(await turn(client, call("mcp__flaky__echo", {"text": "awake"})))
    assert (echoed["is_error"], text_of(echoed)) == (False, "awake")


async def test_the_servers_error_is_the_tool_error_and_nothing_restarts(connect: Any, flaky: None) -> None:
    client = await connect()
    await create(client)
    failed = result(await turn(client, call("mcp__flaky__fail", {"message": "the disk is full"})))
    assert failed["is_error"] is True and "the disk is full" in text_of(failed)
    assert restarts() == 0


async def test_a_bad_input_is_refused_before_the_server_is_called(connect: Any, flaky: None) -> None:
    client = await connect()
    await create(client)
    refused = result(await turn(client, call("mcp__flaky__echo", {"text": 5})))
    assert refused["is_error"] is True and "Nothing was done" in text_of(refused)


async def test_a_server_that_cannot_start_offers_nothing_and_fails_no_turn(
    connect: Any, settings: Any
) -> None:
    settings.PALIMPSEST_MCP_SERVERS = {"gone": {"command": "/nonexistent/mcp-server"}}
    client = await connect()
    session = await create(client)
    assert not [name for name in session["server_tools"] if name.startswith("mcp__")]
    frames = await turn(client, call("mcp__gone__anything", {}))
    assert frames[-1]["stop_reason"] == "end_turn" and not [f for f in frames if f["type"] == "error"]
    manager = mcp_manager(create=False)
    assert manager is not None
    status = manager.status(SERVICE_SCOPE, "gone")
    assert status is not None and status.state == "failed" and "nonexistent" in status.error


async def test_a_server_slow_to_start_holds_no_database_thread_and_the_first_request_offers_its_tools(
    settings: Any,
) -> None:
    """The database threads are every session's (`PALIMPSEST_DB_THREADS`): while as many
    sessions' first turns as there are threads wait for a server's first start, other work still
    gets a thread (before the server is up). The turns' first model calls then offer its tools."""
    import asyncio

    from memory_app.mcp.server import STARTING
    from sessions_app import selectors
    from sessions_app.common.db import db, db_pool
    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.engine.features import features
    from sessions_app.models import AgentSession, ModelCall, Turn

    settings.PALIMPSEST_MCP_SERVERS = {"slow": script_config("slow", "8")}
    pool = db_pool()
    assert pool is not None
    threads = pool._max_workers  # noqa: SLF001 (one session per database thread)
    sessions = [
        await asyncio.to_thread(
            engine_sessions.session_create,
            owner=None,
            title=f"s{i}",
            reserved_tool_names=features().tool_names(),
        )
        for i in range(threads)
    ]
    turns = await asyncio.gather(
        *(runner.turn_start(session_id=s.pk, content="echo hello") for s in sessions)
    )
    manager = mcp_manager(create=False)
    assert manager is not None

    def starting() -> bool:
        status = manager.status(SERVICE_SCOPE, "slow")
        return status is not None and status.state == STARTING

    # The turns began, and a database thread answers, while the server is still starting.
    assert starting()
    assert await db(AgentSession.objects.count)() == len(sessions)
    assert starting()
    for turn_id in turns:
        await runner.turn_wait(turn_id)  # None once it has ended
        assert (await Turn.objects.aget(pk=turn_id)).stop_reason == "end_turn"
    assert not starting()
    for session in sessions:
        call = await ModelCall.objects.filter(session_id=session.pk).order_by("started_at").afirst()
        assert call is not None
        body = await asyncio.to_thread(selectors.model_call_request, call=call)
        assert "mcp__slow__echo" in [tool["name"] for tool in body["tools"]]
