"""spawn_session and report_result (seed 000) through the fake Messages API, in strict mode: what a
child's model receives, what its parent's call returns, and the limits."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from memory_app.notepad.prompts import NOTEPAD_EMPTY_HINT, NOTEPAD_HEADING
from memory_app.subsessions import prompts
from sessions_app.models import AgentSession, Message
from tests.conftest import alist
from tests.fake_anthropic import error, text, tool_use
from tests.memory_app.notepad_support import notepad_last_section, notepad_preset
from tests.memory_app.subsessions_support import (
    MODEL,
    SETTINGS,
    Router,
    assert_every_request_valid,
    child_on,
    is_child,
    last_results,
    of,
    report,
    requests_matching,
    root,
    spawn,
    system_text,
    tool_names,
    turn_of,
)

pytestmark = pytest.mark.django_db(transaction=True)


def result_of(body: dict) -> dict:
    """The parent's spawn call's result, as its model reads it."""
    (block,) = last_results(body)
    assert not block.get("is_error"), block
    return json.loads(block["content"])


async def parent_and_child(connect, strict_anthropic, router: Router, **create: object) -> tuple:
    strict_anthropic.default_reply = router
    client = await connect()
    # The server's default model: the one of the provider the test runs against.
    session = await client.create(model=settings.PALIMPSEST_DEFAULT_MODEL, settings=SETTINGS, **create)
    frames = await turn_of(client, session, "Delegate the count.")
    return client, session, frames


async def test_spawned_childs_first_request_is_its_task_with_an_empty_notepad_and_report_result(
    connect, strict_anthropic
):
    router = (
        Router()
        .on(child_on("Count the rows of sheet 1."), report("500 rows"))
        .on(root, spawn("Count the rows of sheet 1."), text("Sheet 1 has 500 rows."))
    )
    client, session, frames = await parent_and_child(
        connect, strict_anthropic, router, system_prompt="You analyse spreadsheets."
    )
    (child_first,) = requests_matching(strict_anthropic, is_child)
    assert child_first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Count the rows of sheet 1.", **_cached()}]}
    ]
    system = system_text(child_first)
    assert system.startswith("You analyse spreadsheets.")  # the parent's system prompt
    assert f"{NOTEPAD_HEADING}\n{NOTEPAD_EMPTY_HINT}" in system
    assert prompts.CHILD_GUIDANCE in system
    assert child_first["model"] == MODEL
    # At depth 1 of 2 the child may delegate again; it reports, which its parent cannot.
    names = tool_names(child_first)
    sub = names.index("spawn_session")
    assert names[sub : sub + 3] == ["spawn_session", "fork_session", "report_result"]
    assert "report_result" not in tool_names(strict_anthropic.requests[0].body)
    assert frames[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


def _cached() -> dict:
    # The last stored message carries the history's cache breakpoint.
    return {"cache_control": {"type": "ephemeral"}}


async def test_parent_call_returns_the_childs_report_and_both_turns_end_normally(connect, model_servers):
    strict_anthropic = model_servers(strict=True).fake
    router = (
        Router()
        .on(child_on("Count the rows."), tool_use("report_result", {"result": "500 rows"}, text="Counting."))
        .on(root, spawn("Count the rows.", title="Row count"), text("500 rows."))
    )
    client, session, frames = await parent_and_child(connect, strict_anthropic, router)
    (spawned,) = of(frames, session["id"], "session.spawned")
    child_id = spawned["child_session_id"]
    assert spawned["mode"] == "spawn" and spawned["title"] == "Row count"
    parent_call = of(frames, session["id"], "tool.call")[0]
    assert spawned["tool_use_id"] == parent_call["tool_use_id"]
    after = requests_matching(strict_anthropic, root)[-1]
    assert result_of(after) == {"session_id": child_id, "status": "reported", "result": "500 rows"}
    # The child's own events reached the parent's connection, each with the child's own seq.
    child_frames = of(frames, child_id)
    assert [f["seq"] for f in child_frames] == list(range(1, len(child_frames) + 1))
    assert of(frames, child_id, "turn.completed")[0]["stop_reason"] == "end_turn"
    assert frames[-1]["stop_reason"] == "end_turn"
    child = await sync_to_async(AgentSession.objects.get)(pk=child_id)
    assert (child.parent_session_id, child.root_session_id, child.depth) == (
        uuid.UUID(session["id"]),
        uuid.UUID(session["id"]),
        1,
    )
    assert child.spawn_mode == "spawn" and child.spawned_by_tool_use_id == parent_call["tool_use_id"]
    assert router.pending == 0
    assert_every_request_valid(strict_anthropic)
    await client.close()


async def test_child_that_ends_without_reporting_returns_no_report_with_its_last_text(
    connect, strict_anthropic
):
    router = (
        Router()
        .on(child_on("Summarize."), text("The summary is short."))
        .on(root, spawn("Summarize."), text("Done."))
    )
    client, session, frames = await parent_and_child(connect, strict_anthropic, router)
    after = requests_matching(strict_anthropic, root)[-1]
    outcome = result_of(after)
    assert (outcome["status"], outcome["result"]) == ("no_report", "The summary is short.")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_child_whose_model_fails_returns_failed(connect, model_servers):
    strict_anthropic = model_servers(strict=True).fake
    router = (
        Router()
        .on(child_on("Break."), error(400, "invalid_request_error", "no"))
        .on(root, spawn("Break."), text("It failed."))
    )
    client, session, frames = await parent_and_child(connect, strict_anthropic, router)
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    assert of(frames, child_id, "turn.completed")[0]["stop_reason"] == "error"
    outcome = result_of(requests_matching(strict_anthropic, root)[-1])
    assert (outcome["session_id"], outcome["status"], outcome["result"]) == (child_id, "failed", "")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_child_out_of_steps_returns_max_steps(connect, strict_anthropic):
    router = (
        Router()
        .on(child_on("Loop."), tool_use("read_notepad", {}, text="Looking."), tool_use("read_notepad", {}))
        .on(root, spawn("Loop."), text("It ran out of steps."))
    )
    settings = {**SETTINGS, "max_steps_per_turn": 2}
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings=settings)
    await turn_of(client, session, "Go.")
    outcome = result_of(requests_matching(strict_anthropic, root)[-1])
    assert (outcome["status"], outcome["result"]) == ("max_steps", "Looking.")
    await client.close()


async def test_copy_notepad_starts_the_child_with_the_parents_notepad(connect, strict_anthropic):
    router = (
        Router()
        .on(child_on("Check revenue."), report("fine"))
        .on(root, spawn("Check revenue.", copy_notepad=True), text("ok"))
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings=SETTINGS)
    await notepad_preset(session, "## Plan\n- check revenue\n")
    await turn_of(client, session, "Go.")
    (child_first,) = requests_matching(strict_anthropic, is_child)
    assert f"{NOTEPAD_HEADING}\n## Plan\n- check revenue\n" in system_text(child_first)
    await client.close()


async def test_spawn_without_copy_notepad_starts_the_child_with_an_empty_notepad(connect, strict_anthropic):
    router = Router().on(child_on("Check."), report("fine")).on(root, spawn("Check."), text("ok"))
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings=SETTINGS)
    await notepad_preset(session, "parent notes")
    await turn_of(client, session, "Go.")
    (child_first,) = requests_matching(strict_anthropic, is_child)
    assert "parent notes" not in system_text(child_first)
    assert NOTEPAD_EMPTY_HINT in system_text(child_first)
    await client.close()


async def test_childs_notepad_write_never_shows_in_the_parents_prompt(connect, strict_anthropic):
    router = (
        Router()
        .on(
            child_on("Take notes."),
            tool_use("write_notepad", {"content": "CHILD SECRET"}),
            report("noted"),
        )
        .on(root, spawn("Take notes.", copy_notepad=True), text("ok"), text("still ok"))
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings=SETTINGS)
    await notepad_preset(session, "parent notes")
    await turn_of(client, session, "Go.")
    await turn_of(client, session, "And now?")
    child_requests = requests_matching(strict_anthropic, is_child)
    assert notepad_last_section(child_requests[-1]) == "## Session Notepad\nCHILD SECRET"
    for body in requests_matching(strict_anthropic, root):
        assert "CHILD SECRET" not in json.dumps(body)
        assert "parent notes" in system_text(body)
    await client.close()


async def test_empty_task_is_a_tool_error_and_creates_nothing(connect, strict_anthropic):
    router = Router().on(root, spawn("   "), text("I will do it myself."))
    client, session, frames = await parent_and_child(connect, strict_anthropic, router)
    (block,) = last_results(requests_matching(strict_anthropic, root)[-1])
    assert block["is_error"] is True
    assert block["content"] == prompts.TASK_MISSING.format(tool="spawn_session")
    assert await sync_to_async(AgentSession.objects.count)() == 1
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_child_at_the_depth_limit_is_not_offered_spawn_or_fork(connect, strict_anthropic):
    router = Router().on(child_on("Deep."), report("done")).on(root, spawn("Deep."), text("ok"))
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": {"max_depth": 1}})
    await turn_of(client, session, "Go.")
    (child_first,) = requests_matching(strict_anthropic, is_child)
    names = tool_names(child_first)
    assert "report_result" in names
    assert "spawn_session" not in names and "fork_session" not in names
    await client.close()


async def test_spawn_at_the_depth_limit_is_a_tool_error_the_model_can_read(connect, strict_anthropic):
    router = Router().on(root, spawn("Anything."), text("Then I do it here."))
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": {"max_depth": 0}})
    frames = await turn_of(client, session, "Go.")
    first = strict_anthropic.requests[0].body
    assert "spawn_session" not in tool_names(first)
    (block,) = last_results(strict_anthropic.requests[-1].body)
    assert block["is_error"] is True
    assert block["content"] == prompts.DEPTH_LIMIT.format(depth=0, max_depth=0)
    assert await sync_to_async(AgentSession.objects.count)() == 1
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_switched_off_subsessions_offer_no_tools(connect, strict_anthropic):
    strict_anthropic.default_reply = Router()
    client = await connect()
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": {"enabled": False}})
    await turn_of(client, session, "Hello.")
    names = tool_names(strict_anthropic.requests[0].body)
    assert not {"spawn_session", "fork_session", "report_result"} & set(names)
    await client.close()


async def test_child_is_a_full_session_of_the_same_owner_with_the_parents_settings(connect, strict_anthropic):
    router = Router().on(child_on("Work."), report("done")).on(root, spawn("Work."), text("ok"))
    strict_anthropic.default_reply = router
    client = await connect()
    tools = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}]
    session = await client.create(
        model=MODEL, settings={**SETTINGS, "max_steps_per_turn": 7}, tools=tools, context_window=50_000
    )
    await turn_of(client, session, "Go.")
    parent = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    child = await sync_to_async(AgentSession.objects.get)(parent_session=parent)
    assert child.owner_id == parent.owner_id
    assert (child.model, child.context_window, child.client_tools) == (MODEL, 50_000, tools)
    assert child.settings == parent.settings and child.settings["max_steps_per_turn"] == 7
    # Its own history: the task, its answer, the report's result.
    roles = await alist(
        Message.objects.filter(session=child).order_by("position").values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "user"]
    await client.close()
