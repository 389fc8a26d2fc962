"""Agents over the agent websocket (PROTOCOL.md v1.2): `agent.create`, `agent.get`,
`session.create` with `agent`, `session.end`; what a session of an agent is shown (DESIGN.md,
"Agents"), pinned for the epoch."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import services
from sessions_app.engine import runner
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.engine.prompts import LEARNED_EMPTY_HINT, SKILLS_READ_LINE
from sessions_app.models import Agent, AgentPart, AgentSession, AgentSkill, AgentVersion, SessionEvent
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-6"


async def agent_created(client: Any, **fields: Any) -> dict:
    await client.send({"type": "agent.create", **fields})
    reply = await client.recv()
    assert reply["type"] == "agent.created", reply
    return reply["agent"]


async def error_of(client: Any, frame: dict) -> dict:
    await client.send(frame)
    reply = await client.recv()
    assert reply["type"] == "error", reply
    return reply


def system_texts(body: dict) -> list[str]:
    return [block["text"] for block in body.get("system", [])]


def learned_set(agent_name: str, text: str) -> None:
    """The learned text changed as a version (what `edit_system_prompt` does)."""
    agent = Agent.objects.get(name=agent_name)
    AgentVersion.objects.create(
        agent=agent, part=AgentPart.LEARNED, version=agent.learned_version + 1, content=text, author="test"
    )
    Agent.objects.filter(pk=agent.pk).update(learned=text, learned_version=agent.learned_version + 1)


# -- agent.create / agent.get ------------------------------------------------------------------
async def test_create_then_get_an_agent(connect: Any) -> None:
    client = await connect()
    created = await agent_created(client, name="auditor", system_prompt="You audit ledgers.", model=MODEL)
    assert created["name"] == "auditor"
    assert (created["instructions"], created["learned"], created["model"]) == (
        "You audit ledgers.",
        "",
        MODEL,
    )
    assert created["versions"] == {"instructions": 1, "learned": 0}
    assert (created["skills"], created["tools"]) == ([], [])
    await client.send({"type": "agent.get", "name": "auditor", "request_id": 3})
    reply = await client.recv()
    assert (reply["type"], reply["request_id"]) == ("agent.state", 3)
    assert reply["agent"] == created
    version = await sync_to_async(AgentVersion.objects.get)(agent__name="auditor")
    assert (version.part, version.version, version.content) == ("instructions", 1, "You audit ledgers.")
    assert version.author.startswith("client:")


@pytest.mark.parametrize("name", ["", "Auditor", "a b", "x" * 65, "ünï", 7])
async def test_a_bad_name_is_invalid_value(connect: Any, name: Any) -> None:
    client = await connect()
    reply = await error_of(client, {"type": "agent.create", "name": name})
    assert reply["code"] in ("invalid_value", "invalid_frame")
    assert await sync_to_async(Agent.objects.count)() == 0


async def test_a_second_agent_of_the_same_name_is_agent_exists(connect: Any) -> None:
    client = await connect()
    await agent_created(client, name="auditor")
    reply = await error_of(client, {"type": "agent.create", "name": "auditor", "system_prompt": "other"})
    assert reply["code"] == "agent_exists"
    agent = await sync_to_async(Agent.objects.get)(name="auditor")
    assert agent.instructions == ""


async def test_bad_settings_or_model_create_nothing(connect: Any) -> None:
    client = await connect()
    reply = await error_of(client, {"type": "agent.create", "name": "a", "settings": {"notepad": {"x": 1}}})
    assert reply["code"] == "invalid_settings"
    assert await sync_to_async(Agent.objects.count)() == 0


async def test_another_clients_agent_is_not_found_and_a_rotated_token_keeps_its_agents(
    connect: Any, make_token: Any
) -> None:
    alice = await connect(await make_token("alice"))
    await agent_created(alice, name="auditor")
    bob = await connect(await make_token("bob"))
    assert (await error_of(bob, {"type": "agent.get", "name": "auditor"}))["code"] == "agent_not_found"
    reply = await error_of(bob, {"type": "session.create", "agent": "auditor"})
    assert reply["code"] == "agent_not_found"
    # Bob may have his own agent of that name.
    await agent_created(bob, name="auditor")
    # Alice's new token (the same name) finds hers.
    alice_again = await connect(await make_token("alice"))
    await alice_again.send({"type": "agent.get", "name": "auditor"})
    assert (await alice_again.recv())["type"] == "agent.state"


# -- session.create with an agent -----------------------------------------------------------------
async def test_a_session_of_an_agent_takes_its_model_and_settings_and_names_it(connect: Any) -> None:
    client = await connect()
    await agent_created(
        client, name="auditor", model=MODEL, settings={"notepad": {"enabled": False}, "max_steps_per_turn": 7}
    )
    await client.send({"type": "agent.get", "name": "auditor"})
    # The agent keeps its settings as given: its sessions get the features' defaults of their day.
    assert (await client.recv())["agent"]["settings"] == {
        "notepad": {"enabled": False},
        "max_steps_per_turn": 7,
    }
    session = await client.create(agent="auditor", settings={"max_steps_per_turn": 9})
    assert session["agent"] == "auditor"
    assert session["model"] == MODEL
    assert session["settings"]["notepad"]["enabled"] is False  # the agent's
    assert session["settings"]["max_steps_per_turn"] == 9  # the session's own, over the agent's
    assert session["settings"]["scratchpad"]["enabled"] is True  # the features' default
    plain = await client.create()
    assert plain["agent"] is None


async def test_what_a_session_of_an_agent_sees_and_in_what_order(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_created(client, name="auditor", system_prompt="You audit ledgers.")
    agent = await sync_to_async(Agent.objects.get)(name="auditor")
    await sync_to_async(AgentSkill.objects.create)(
        agent=agent, name="vat-check", description="Check VAT lines.", content="...", version=1
    )
    await sync_to_async(AgentSkill.objects.create)(
        agent=agent, name="audit-trail", description="Walk the audit trail.", content="...", version=1
    )
    await client.create(agent="auditor", system_prompt="This session: Q3.")
    await client.send({"type": "user.message", "content": "go"})
    await client.until("turn.completed")
    texts = system_texts(fake_anthropic.requests[0].body)
    joined = "\n\n".join(texts)
    assert texts[0].startswith("You audit ledgers.\n\nThis session: Q3.")
    # The first block (cached across epochs) holds the instructions, the session's prompt and the
    # guidance; the second what is pinned for the epoch: the learned text, the skills, the notepad.
    texts = texts[1].split("\n\n")
    learned = f"## Learned Instructions\n{LEARNED_EMPTY_HINT}"
    skills = (
        "## Skills\n- audit-trail: Walk the audit trail.\n- vat-check: Check VAT lines.\n" + SKILLS_READ_LINE
    )
    assert learned in texts and skills in texts
    # Instructions, the session's prompt, then the learned text, the skills, and the notepad last.
    order = [
        joined.index(p)
        for p in ("You audit", "This session", "## Learned", "## Skills", "## Session Notepad")
    ]
    assert order == sorted(order)
    assert LEARNED_EMPTY_HINT == (
        "(empty — use edit_system_prompt to keep lasting instructions and observations for all your "
        "future sessions)"
    )


async def test_no_skills_section_without_skills_and_no_hint_when_not_editable(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_created(client, name="fixed")
    await client.create(agent="fixed", settings={"knowledge": {"learned_editable": False}})
    await client.send({"type": "user.message", "content": "go"})
    await client.until("turn.completed")
    joined = "\n".join(system_texts(fake_anthropic.requests[0].body))
    assert "## Skills" not in joined and "## Learned Instructions" not in joined


async def test_an_edit_waits_for_the_next_compaction_and_the_prefix_stays(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_created(client, name="auditor")
    session = await client.create(agent="auditor")
    fake_anthropic.enqueue(text("one"), text("two"))
    await client.send({"type": "user.message", "content": "one"})
    await client.until("turn.completed")
    await sync_to_async(learned_set)("auditor", "Always cite the ledger line.")
    await client.send({"type": "user.message", "content": "two"})
    await client.until("turn.completed")
    first, second = (r.body for r in fake_anthropic.requests[:2])
    assert first["system"] == second["system"]  # pinned: the running session's prefix stays
    await compaction_operator_start(session_id=uuid.UUID(session["id"]))
    await runner.turns_wait_idle(timeout=10)
    await client.send({"type": "user.message", "content": "three"})
    await client.until("turn.completed")
    after = fake_anthropic.requests[-1].body
    assert "## Learned Instructions\nAlways cite the ledger line." in "\n\n".join(system_texts(after))
    # A new session starts from the newest versions at once.
    await client.create(agent="auditor")
    await client.send({"type": "user.message", "content": "new"})
    await client.until("turn.completed")
    assert "## Learned Instructions\nAlways cite the ledger line." in "\n\n".join(
        system_texts(fake_anthropic.requests[-1].body)
    )


async def test_refresh_immediate_applies_an_edit_from_the_next_call(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_created(client, name="auditor")
    await client.create(agent="auditor", settings={"knowledge": {"refresh": "immediate"}})
    await client.send({"type": "user.message", "content": "one"})
    await client.until("turn.completed")
    await sync_to_async(learned_set)("auditor", "New rule.")
    await client.send({"type": "user.message", "content": "two"})
    await client.until("turn.completed")
    assert "## Learned Instructions\nNew rule." in "\n\n".join(system_texts(fake_anthropic.requests[1].body))


# -- session.end --------------------------------------------------------------------------------
async def test_end_a_session_then_it_takes_no_messages_but_stays_readable(
    connect: Any, make_token: Any
) -> None:
    token = await make_token()
    client = await connect(token)
    session = await client.create()
    await client.send({"type": "user.message", "content": "remember: kept"})
    await client.until("turn.completed")
    await client.send({"type": "session.end"})
    ended = await client.until("session.ended")
    assert ended[-1]["reason"] == "client"
    reply = await error_of(client, {"type": "user.message", "content": "more", "request_id": 5})
    assert (reply["code"], reply["request_id"]) == ("session_ended", 5)
    await client.send({"type": "session.get"})
    state = await client.recv()
    assert state["session"]["status"] == "ended"
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    assert row.notepad == "kept\n" and row.ended_at is not None
    # Attachable, and its events replay.
    other = await connect(token)
    await other.send({"type": "session.attach", "session_id": session["id"]})
    frames = await other.until("session.attached")
    assert "session.ended" in [f["type"] for f in frames]
    # Ending it again says so.
    again = await error_of(client, {"type": "session.end"})
    assert again["code"] == "session_ended"


async def test_ending_cancels_a_running_turn_first(connect: Any, fake_anthropic: FakeAnthropicServer) -> None:
    client = await connect()
    session = await client.create(
        tools=[{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]
    )
    fake_anthropic.enqueue(tool_use("lookup", {}))
    await client.send({"type": "user.message", "content": "go"})
    await client.until("tool.call")  # the turn waits for the client's result
    await client.send({"type": "session.end"})
    frames = await client.until("session.ended")
    types = [f["type"] for f in frames]
    completed = next(f for f in frames if f["type"] == "turn.completed")
    assert completed["stop_reason"] == "cancelled"
    assert types.index("turn.completed") < types.index("session.ended")
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    assert (row.status, row.current_turn_id) == ("ended", None)


async def test_end_another_of_its_sessions_by_id_and_not_anothers(connect: Any) -> None:
    client = await connect()
    first = await client.create()
    await client.create()  # attached to the second now
    await client.send({"type": "session.end", "session_id": first["id"]})
    await client.nothing_more()
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(first["id"]))
    assert row.status == "ended"
    stranger = await connect()
    await stranger.create()
    reply = await error_of(stranger, {"type": "session.end", "session_id": first["id"]})
    assert reply["code"] == "session_not_found"
    events = await sync_to_async(
        lambda: list(
            SessionEvent.objects.filter(session_id=first["id"], type="session.ended").values_list(
                "seq", flat=True
            )
        )
    )()
    assert len(events) == 1


async def test_a_turn_refused_in_a_session_being_ended() -> None:
    from sessions_app.engine import sessions as engine_sessions

    session = await sync_to_async(engine_sessions.session_create)(owner=None)
    await sync_to_async(services.session_end_request)(session_id=session.pk)
    with pytest.raises(services.SessionEnded):
        await runner.turn_start(session_id=session.pk, content="late")


# -- ownership by the client's name (a rotated token keeps its sessions and agents) --------------
async def test_a_rotated_token_keeps_the_sessions_and_a_revoked_old_one_stops_nothing_of_the_new(
    connect: Any, make_token: Any
) -> None:
    old_raw = await make_token("alice")
    old = await connect(old_raw)
    session = await old.create()
    await agent_created(old, name="auditor")
    new = await connect(await make_token("alice"))
    await new.send({"type": "session.attach", "session_id": session["id"]})
    await new.until("session.attached")
    from sessions_app.models import AgentToken

    old_token = await sync_to_async(AgentToken.objects.get)(token_hash=services.agent_token_hash(old_raw))
    await sync_to_async(services.agent_token_revoke)(token=old_token)
    await new.send({"type": "user.message", "content": "still mine"})
    frames = await new.until("turn.completed")
    assert frames[-1]["stop_reason"] == "end_turn"
    await new.send({"type": "agent.get", "name": "auditor"})
    assert (await new.recv())["type"] == "agent.state"
    # Another client's token does not see them.
    stranger = await connect(await make_token("mallory"))
    reply = await error_of(stranger, {"type": "session.attach", "session_id": session["id"]})
    assert reply["code"] == "session_not_found"


async def test_the_only_token_of_a_client_revoked_stops_its_sessions() -> None:
    from sessions_app.engine import sessions as engine_sessions

    token, _ = await sync_to_async(services.agent_token_create)(name="solo")
    session = await sync_to_async(engine_sessions.session_create)(owner=token)
    await sync_to_async(services.agent_token_revoke)(token=token)
    with pytest.raises(services.TokenRevoked):
        await runner.turn_start(session_id=session.pk, content="no")


async def test_a_learned_text_ending_with_a_newline_is_followed_by_one_blank_line(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await agent_created(client, name="auditor")
    await sync_to_async(learned_set)("auditor", "- rule one\n")
    agent = await sync_to_async(Agent.objects.get)(name="auditor")
    await sync_to_async(AgentSkill.objects.create)(agent=agent, name="s", description="d", version=1)
    await client.create(agent="auditor")
    await client.send({"type": "user.message", "content": "go"})
    await client.until("turn.completed")
    joined = "\n".join(system_texts(fake_anthropic.requests[0].body))
    assert "## Learned Instructions\n- rule one\n\n## Skills\n- s: d\n" in joined
