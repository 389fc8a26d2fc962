"""Reconnecting without loss: the server (a real daphne) is killed with SIGKILL in the middle
of a turn and started again on the same port and database; the caller's iteration goes on with
no gap and no duplicate, and ends with the turn's `turn.completed`."""

from __future__ import annotations

import asyncio
import gc
import signal
from pathlib import Path

import pytest

from palimpsest_client import (
    AssistantDelta,
    ConnectionLost,
    ErrorEvent,
    Event,
    Reconnect,
    ToolCall,
    TurnCompleted,
    TurnStarted,
    connect,
    tool,
)
from tests.servers import Daphne, manage

QUICK = Reconnect(initial_delay=0.1, max_delay=0.5)
LONG_ANSWER = " ".join(f"word{n}" for n in range(40))


def restart(server: Daphne, log: Path) -> Daphne:
    """A new daphne on the same port and database as `server` (which must be dead)."""
    again = Daphne(server.env, log)
    again.port = server.port
    return again.start()


def kill(server: Daphne) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=10)


def crash_env(env: dict[str, str]) -> dict[str, str]:
    # A short lease, so the turn of the killed process is closed within seconds; a slow
    # scripted model, so the turn is still streaming when the server is killed.
    return {**env, "PALIMPSEST_TURN_LEASE_SECONDS": "2", "PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS": "0.1"}


def assert_each_seq_once_in_order(events: list[Event]) -> None:
    by_session: dict[str, list[int]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event.seq)
    for seqs in by_session.values():
        assert seqs == list(range(1, len(seqs) + 1))


async def test_a_server_killed_mid_turn_costs_the_caller_no_event(server_env_sqlite, token, tmp_path):
    env = crash_env(server_env_sqlite)
    server = Daphne(env, tmp_path / "first.log").start()
    restarted: Daphne | None = None
    try:
        async with connect(
            server.ws_url, token, reconnect=Reconnect(initial_delay=0.1, max_delay=0.5)
        ) as client:
            session = await client.create_session(title="crash")
            events: list[Event] = []
            async for event in session.send(f"echo {LONG_ANSWER}"):
                events.append(event)
                if restarted is None and sum(isinstance(e, AssistantDelta) for e in events) == 5:
                    kill(server)
                    restarted = await asyncio.to_thread(restart, server, tmp_path / "second.log")
            after = [e async for e in session.send("echo back again")]
            assert client.reconnects == 1
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
    assert_each_seq_once_in_order(events + after)
    started = next(e for e in events if isinstance(e, TurnStarted))
    last = events[-1]
    # The killed process's turn was closed by the restarted one, and the caller heard it.
    assert isinstance(last, TurnCompleted) and last.turn_id == started.turn_id
    assert last.stop_reason == "error"
    assert [e.code for e in events if isinstance(e, ErrorEvent)] == ["server_stopped"]
    assert sum(isinstance(e, AssistantDelta) for e in events) >= 5
    assert after[-1].stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert [e for e in after if isinstance(e, AssistantDelta)][-1].text.endswith("again")


async def test_a_server_killed_while_a_sub_sessions_client_tool_runs_closes_the_root_and_the_child_goes_on(
    server_env_sqlite, token, tmp_path
):
    env = crash_env(server_env_sqlite)
    server = Daphne(env, tmp_path / "first.log").start()
    restarted: Daphne | None = None
    release = asyncio.Event()

    @tool("lookup", "Look a word up.", {"type": "object"})
    async def lookup(args: dict) -> str:
        await release.wait()
        return "found while the server was down"

    try:
        async with connect(
            server.ws_url, token, reconnect=Reconnect(initial_delay=0.1, max_delay=0.5)
        ) as client:
            session = await client.create_session(tools=[lookup])
            events: list[Event] = []
            async for event in session.send("spawn tool lookup {}"):
                events.append(event)
                if restarted is None and isinstance(event, ToolCall) and event.name == "lookup":
                    kill(server)
                    release.set()  # answered while no server is there
                    restarted = await asyncio.to_thread(restart, server, tmp_path / "second.log")
            assert client.reconnects == 1
            child = next(e.session_id for e in events if e.session_id != session.id)

            async def child_completed() -> None:
                if any(isinstance(e, TurnCompleted) and e.session_id == child for e in events):
                    return
                async for event in session.events():
                    events.append(event)
                    if isinstance(event, TurnCompleted) and event.session_id == child:
                        return

            await asyncio.wait_for(child_completed(), timeout=60)
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
    assert_each_seq_once_in_order(events)
    completed = {e.session_id: e.stop_reason for e in events if isinstance(e, TurnCompleted)}
    # The root's turn died in the middle of a server tool (spawn_session): it is closed and heard.
    assert completed[session.id] == "error"
    assert [e.code for e in events if isinstance(e, ErrorEvent) and e.session_id == session.id] == [
        "server_stopped"
    ]
    # The child's turn waited for the client's answer: it was taken over, the answer sent again
    # after the reconnect was used, and it finished.
    assert completed[child] == "end_turn"
    assert not [e for e in events if isinstance(e, ErrorEvent) and e.session_id == child]


async def test_a_session_deleted_while_the_connection_was_down_ends_the_client(
    server_env_sqlite, token, tmp_path, caplog
):
    server = Daphne(server_env_sqlite, tmp_path / "first.log").start()
    restarted: Daphne | None = None
    try:
        async with connect(server.ws_url, token, reconnect=QUICK) as client:
            session = await client.create_session(title="deleted")
            before = [e async for e in session.send("echo hello")]
            kill(server)
            # Deleted (by an operator, say) before the client is back: re-attaching is refused.
            await asyncio.to_thread(
                manage,
                "shell",
                "-c",
                "from sessions_app.models import AgentSession; "
                f"AgentSession.objects.filter(pk='{session.id}').delete()",
                env=server_env_sqlite,
            )
            restarted = await asyncio.to_thread(restart, server, tmp_path / "second.log")
            # The client says so instead of waiting for ever for a re-attach that cannot come.
            with pytest.raises(
                ConnectionLost, match=r"refused to re-attach to session .* \(session_not_found"
            ):
                await asyncio.wait_for(session.state(), timeout=60)
            assert client.failure is not None and client.reconnects == 1
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
    assert before[-1].stop_reason == "end_turn"  # type: ignore[attr-defined]
    # asyncio reports an exception nobody retrieved when its future is collected (the client's
    # `failure` holds the traceback that holds it).
    del client, session
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
