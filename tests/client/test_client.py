"""`palimpsest_client` driving a real daphne: turns, client tools (the session's and a
sub-session's), cancelling, state, and the protocol's errors raised as exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import uuid

import pytest

from palimpsest_client import (
    AgentExists,
    AgentNotFound,
    ApprovalRequested,
    AssistantDelta,
    AssistantMessage,
    AuthenticationError,
    ClientTool,
    Event,
    InvalidRequest,
    NotepadUpdated,
    NoTurnInProgress,
    ProtocolError,
    Reconnect,
    SessionEnded,
    SessionNotFound,
    SessionSpawned,
    ToolCall,
    ToolError,
    ToolResult,
    TurnCompleted,
    TurnInProgress,
    TurnStarted,
    UserMessage,
    connect,
    tool,
)
from tests.servers import Daphne, manage

LOOKUP_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
WAIT = ClientTool("wait", "Wait for the client.", {"type": "object"})


def assert_gapless(events: list[Event]) -> None:
    """Each session's seqs are consecutive, each seen once."""
    by_session: dict[str, list[int]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event.seq)
    for seqs in by_session.values():
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def collect(session, text: str) -> list[Event]:
    return [event async for event in session.send(text)]


async def test_a_turn_yields_typed_events_until_it_completes(daphne: Daphne, token: str):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="typed")
        events = await collect(session, "echo hello there")
    assert isinstance(events[0], UserMessage) and events[0].content == "echo hello there"
    assert isinstance(events[1], TurnStarted)
    assert "".join(e.text for e in events if isinstance(e, AssistantDelta)) == "hello there"
    message = next(e for e in events if isinstance(e, AssistantMessage))
    assert message.text == "hello there"
    last = events[-1]
    assert isinstance(last, TurnCompleted) and last.stop_reason == "end_turn"
    assert last.turn_id == events[1].turn_id
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.session_id for e in events} == {session.id}


async def test_a_client_tool_is_answered_by_its_handler(daphne: Daphne, token: str):
    seen: list[dict] = []

    @tool("lookup", "Look a word up.", LOOKUP_SCHEMA)
    async def lookup(args: dict) -> str:
        seen.append(args)
        return f"{args['q']} means hello"

    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(tools=[lookup])
        assert session.info["tools"] == [lookup.spec()]
        events = await collect(session, 'tool lookup {"q": "ciao"}')
    assert seen == [{"q": "ciao"}]
    call = next(e for e in events if isinstance(e, ToolCall))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert (call.name, call.executor, call.input) == ("lookup", "client", {"q": "ciao"})
    assert (result.tool_use_id, result.is_error) == (call.tool_use_id, False)
    assert [e for e in events if isinstance(e, AssistantMessage)][-1].text == (
        "lookup returned: ciao means hello"
    )
    assert events[-1].stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert_gapless(events)


async def test_a_dict_of_handlers_answers_and_a_raising_handler_is_an_error_result(daphne, token):
    def broken(args: dict) -> str:
        raise ToolError("the dictionary is closed")

    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(
            tools=[tool("lookup", "Look up.", LOOKUP_SCHEMA)(broken)],
            handlers={"lookup": lambda args: {"word": args["q"], "found": True}},
        )
        found = await collect(session, 'tool lookup {"q": "a"}')
        session.tool("lookup", "Look up.", LOOKUP_SCHEMA)(broken)  # the declaration, checked
        failed = await collect(session, 'tool lookup {"q": "b"}')
        with pytest.raises(ValueError, match="declares no client tool 'ask'"):
            session.tool("ask")
        with pytest.raises(ValueError, match="declared with the description 'Look up.'"):
            session.tool("lookup", "Something else.")
        with pytest.raises(ValueError, match="another input_schema"):
            session.tool("lookup", "Look up.", {"type": "object"})
    found_result = next(e for e in found if isinstance(e, ToolResult))
    assert json.loads(found_result.content) == {"word": "a", "found": True}
    failed_result = next(e for e in failed if isinstance(e, ToolResult))
    assert failed_result.is_error is True
    assert "the dictionary is closed" in json.dumps(failed_result.content)
    assert [e for e in failed if isinstance(e, AssistantMessage)][-1].text == (
        "lookup failed: the dictionary is closed"
    )


async def test_a_sub_sessions_client_tool_is_answered_on_the_roots_connection(daphne, token):
    answered: list[dict] = []

    @tool("lookup", "Look a word up.", LOOKUP_SCHEMA)
    def lookup(args: dict) -> str:
        answered.append(args)
        return "the owner is Ada"

    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(tools=[lookup])
        events = await collect(session, 'spawn tool lookup {"q": "owner"}')
    spawned = next(e for e in events if isinstance(e, SessionSpawned))
    child = spawned.child_session_id
    call = next(e for e in events if isinstance(e, ToolCall) and e.name == "lookup")
    assert call.session_id == child and call.executor == "client"
    assert answered == [{"q": "owner"}]
    child_result = next(e for e in events if isinstance(e, ToolResult) and e.session_id == child)
    assert child_result.tool_use_id == call.tool_use_id and child_result.is_error is False
    # The child reported the tool's answer; the root reported the child's.
    final = [e for e in events if isinstance(e, AssistantMessage) and e.session_id == session.id][-1]
    assert "lookup returned: the owner is Ada" in final.text
    assert events[-1].session_id == session.id and events[-1].stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert {e.session_id for e in events} == {session.id, child}
    assert_gapless(events)


async def test_a_call_without_a_handler_is_left_to_the_caller(daphne, token):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(tools=[ClientTool("ask", "Ask the user.", {"type": "object"})])
        events = []
        async for event in session.send("tool ask {}"):
            events.append(event)
            if isinstance(event, ToolCall):
                await session.respond(event.tool_use_id, [{"type": "text", "text": "by hand"}])
    assert [e for e in events if isinstance(e, AssistantMessage)][-1].text == "ask returned: by hand"


async def test_state_and_notepad_follow_the_session(daphne, token):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="memo")
        assert session.notepad() is None
        events = await collect(session, "remember: the key is blue")
        state = await session.state()
    assert any(isinstance(e, NotepadUpdated) for e in events)
    assert session.notepad() == "the key is blue\n"
    assert state["id"] == session.id and state["title"] == "memo"
    assert state["status"] == "idle" and state["last_seq"] == events[-1].seq


async def test_attach_replays_and_answers_a_waiting_call(daphne, token):
    async with connect(daphne.ws_url, token) as first:
        # Declared without a handler: this connection leaves the call unanswered.
        session = await first.create_session(tools=[ClientTool("lookup", "Look up.", LOOKUP_SCHEMA)])
        async for event in session.send('tool lookup {"q": "x"}'):
            if isinstance(event, ToolCall):
                break
    async with connect(daphne.ws_url, token) as second:
        attached = await second.attach(session.id, handlers={"lookup": lambda a: "answered later"})
        assert [e.seq for e in attached.replayed] == list(range(1, len(attached.replayed) + 1))
        assert isinstance(attached.replayed[-1], ToolCall)
        done = None
        async for event in attached.events():
            if isinstance(event, TurnCompleted):
                done = event
                break
        messages = [e async for e in _until_completed(attached, "echo again")]
    assert done is not None and done.stop_reason == "end_turn"
    assert messages[-1].stop_reason == "end_turn"  # type: ignore[attr-defined]


async def _until_completed(session, text):
    async for event in session.send(text):
        yield event


async def test_protocol_errors_are_raised_with_their_codes(daphne, token):
    async with connect(daphne.ws_url, token) as client:
        with pytest.raises(SessionNotFound) as missing:
            await client.attach("00000000-0000-0000-0000-000000000000")
        assert missing.value.code == "session_not_found"
        with pytest.raises(InvalidRequest) as invalid:
            await client.create_session(model="m" * 101)
        assert invalid.value.code == "invalid_value"
        session = await client.create_session(tools=[WAIT])  # no handler: the turn waits
        with pytest.raises(NoTurnInProgress):
            await session.cancel()
        turn = session.send("tool wait {}")
        async for event in turn:
            if isinstance(event, ToolCall):
                break
        await turn.aclose()
        with pytest.raises(TurnInProgress) as busy:
            await collect(session, "echo too soon")
        assert busy.value.code == "turn_in_progress" and isinstance(busy.value, ProtocolError)
        cancelled = await session.cancel()
    assert cancelled.stop_reason == "cancelled"


async def test_a_wrong_token_raises_authentication_error_and_is_not_retried(daphne):
    async with connect(daphne.ws_url, "pal_wrong", reconnect=Reconnect(initial_delay=0.01)) as client:
        with pytest.raises(AuthenticationError) as refused:
            await client.create_session()
        assert refused.value.close_code == 4401
        assert client.reconnects == 0
        with pytest.raises(AuthenticationError):
            await client.create_session()


async def _send_until_revoked(client, session, text: str, env: dict[str, str]) -> list[str]:
    """Send `text`, revoke the token at the tool call, and wait until the client ends with
    `AuthenticationError` (4401); the stop reasons of the turn's end, if it came before."""
    stop_reasons = []
    with contextlib.suppress(AuthenticationError):
        async for event in session.send(text):
            if isinstance(event, ToolCall):
                await asyncio.to_thread(manage, "revoke_agent_token", "client-tests", env=env)
            elif isinstance(event, TurnCompleted):
                stop_reasons.append(event.stop_reason)
    await asyncio.wait_for(client.wait_ended(), 30)
    assert isinstance(client.failure, AuthenticationError)
    return stop_reasons


async def test_a_token_revoked_mid_session_ends_the_iteration(server_env_sqlite, tmp_path, token):
    env = {**server_env_sqlite, "PALIMPSEST_TOKEN_RECHECK_SECONDS": "0.2"}
    with Daphne(env, tmp_path / "revoke.log") as server:
        async with connect(server.ws_url, token, reconnect=Reconnect(initial_delay=0.01)) as client:
            session = await client.create_session(tools=[WAIT])
            ended = await _send_until_revoked(client, session, "tool wait {}", env)
            assert client.reconnects == 0
    # The revocation cancelled the turn too: its end came first, unless the close overtook it.
    assert ended in ([], ["cancelled"])


async def test_a_refused_attach_or_create_leaves_the_client_on_its_session(daphne, token):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="stays")
        first = await collect(session, "remember: the key is blue")
        with pytest.raises(SessionNotFound):
            await client.attach("nonsense")
        with pytest.raises(SessionNotFound):
            await client.attach(str(uuid.uuid4()))
        with pytest.raises(InvalidRequest):
            await client.create_session(model="m" * 101)
        assert client.session is session
        assert session.notepad() == "the key is blue\n"  # what the events said, kept
        second = await collect(session, "echo still here")
        assert (await session.state())["title"] == "stays"
    assert [e for e in second if isinstance(e, AssistantMessage)][-1].text == "still here"
    assert_gapless(first + second)
    assert second[0].seq == first[-1].seq + 1
    assert client.reconnects == 0


async def test_a_refused_attach_during_a_turn_loses_none_of_its_events(server_env_sqlite, tmp_path, token):
    # A turn of about a second: the attach is answered while it streams.
    env = {**server_env_sqlite, "PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS": "0.01"}
    words = " ".join(f"w{n}" for n in range(1000))
    with Daphne(env, tmp_path / "attach.log") as server:
        async with connect(server.ws_url, token, reconnect=Reconnect(initial_delay=0.01)) as client:
            session = await client.create_session()
            events: list[Event] = []
            refused: list[ProtocolError] = []
            async with asyncio.timeout(60):
                async for event in session.send(f"echo {words}"):
                    events.append(event)
                    if isinstance(event, AssistantDelta) and not refused:
                        # The turn's deltas go on arriving while the server answers this.
                        with pytest.raises(SessionNotFound) as missing:
                            await client.attach(str(uuid.uuid4()))
                        refused.append(missing.value)
            assert client.session is session and client.reconnects == 0
    assert "".join(e.text for e in events if isinstance(e, AssistantDelta)) == words
    assert isinstance(events[-1], TurnCompleted) and events[-1].stop_reason == "end_turn"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_a_tool_answer_ready_after_the_token_was_revoked_is_dropped_quietly(
    server_env_sqlite, tmp_path, token, caplog
):
    env = {**server_env_sqlite, "PALIMPSEST_TOKEN_RECHECK_SECONDS": "0.2"}
    release = asyncio.Event()

    @tool("slow", "Answer when released.", {"type": "object"})
    async def slow(args: dict) -> str:
        await release.wait()
        return "too late"

    with Daphne(env, tmp_path / "revoke.log") as server:
        async with connect(server.ws_url, token) as client:
            session = await client.create_session(tools=[slow])
            await _send_until_revoked(client, session, "tool slow {}", env)
            release.set()  # the handler ends after the client did: its answer cannot go out
            for _ in range(20):
                await asyncio.sleep(0)
    # asyncio reports an exception nobody retrieved (with a traceback) when its task is collected.
    del client, session
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_attaching_to_a_tree_larger_than_a_page_follows_every_sub_session(
    tmp_path, server_env_sqlite, token
):
    """The server follows one descendant per attach here: the client asks for the others
    (`session.follow`) and sees every child's events to its last (gapless: a gap would make it
    re-attach)."""
    env = {**server_env_sqlite, "PALIMPSEST_ATTACH_DESCENDANTS": "1"}
    with Daphne(env, tmp_path / "pages.log") as server:
        async with connect(server.ws_url, token) as first:
            session = await first.create_session()
            children = []
            for task in ("spawn first task", "spawn second task", "spawn third task"):
                events = await collect(session, task)
                children += [e.child_session_id for e in events if isinstance(e, SessionSpawned)]
            last = {child: session.last_seq(child) for child in children}
        assert len(children) == 3 and all(last.values())
        async with connect(server.ws_url, token) as second:
            attached = await second.attach(session.id)
            for _ in range(300):  # up to 30 s
                if {child: attached.last_seq(child) for child in children} == last:
                    break
                await asyncio.sleep(0.1)
            assert {child: attached.last_seq(child) for child in children} == last
            assert second.reconnects == 0


async def test_agents_and_ending_a_session(daphne: Daphne, token: str):
    async with connect(daphne.ws_url, token) as client:
        with pytest.raises(AgentNotFound) as missing:
            await client.get_agent("auditor")
        assert missing.value.code == "agent_not_found"
        created = await client.create_agent(
            "auditor", system_prompt="You audit.", settings={"max_steps_per_turn": 5}
        )
        assert (created["name"], created["instructions"], created["versions"]) == (
            "auditor",
            "You audit.",
            {"instructions": 1, "learned": 0},
        )
        with pytest.raises(AgentExists):
            await client.create_agent("auditor")
        with pytest.raises(InvalidRequest):
            await client.create_agent("Not A Name")
        assert (await client.get_agent("auditor")) == created
        session = await client.create_session(agent="auditor")
        assert session.info["agent"] == "auditor"
        assert session.info["settings"]["max_steps_per_turn"] == 5
        events = await collect(session, "echo hi")
        assert isinstance(events[-1], TurnCompleted)
        await session.end()
        assert (await session.state())["status"] == "ended"
        with pytest.raises(SessionEnded) as ended:
            await collect(session, "echo more")
        assert ended.value.code == "session_ended"
        with pytest.raises(SessionEnded):
            await session.end()
        with pytest.raises(AgentNotFound):
            await client.create_session(agent="nobody")


async def test_a_call_that_asks_is_approved_or_denied_by_the_caller(daphne, token):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(settings={"approvals": {"count_words": "always_ask"}})
        seen: list[Event] = []
        async for event in session.send('tool count_words {"text": "a b c"}'):
            seen.append(event)
            if isinstance(event, ApprovalRequested):
                with pytest.raises(ProtocolError) as stale:
                    await session.approve(event.tool_use_id, input_sha256="0" * 64)
                assert stale.value.code == "approval_input_mismatch"
                answered = await session.approve(event.tool_use_id, input_sha256=event.input_sha256)
                assert answered.approved is True and answered.author.startswith("client:")
        result = next(e for e in seen if isinstance(e, ToolResult))
        assert result.is_error is False
        with pytest.raises(ProtocolError) as late:
            await session.deny(result.tool_use_id)
        assert late.value.code == "approval_not_pending"
        async for event in session.send('tool count_words {"text": "x"}'):
            if isinstance(event, ApprovalRequested):
                denied = await session.deny(event.tool_use_id, "not now")
                assert (denied.approved, denied.reason) == (False, "not now")
            if isinstance(event, ToolResult):
                assert event.is_error is True and "not now" in str(event.content)
