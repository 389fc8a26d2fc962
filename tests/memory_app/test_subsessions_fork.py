"""fork_session (seed 000) through the fake Messages API, in strict mode: a fork starts with the
parent's current history up to its last completed step, its notepad and its scratchpad."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad.prompts import NOTEPAD_HEADING
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.prompts import BLOCK_START
from memory_app.subsessions.services import tool_pairs_complete
from sessions_app.common.db import db
from sessions_app.models import AgentSession, Archive, Message
from tests.conftest import alist
from tests.fake_anthropic import Reply, text, tool_use
from tests.memory_app.notepad_support import notepad_preset
from tests.memory_app.subsessions_support import (
    MODEL,
    Router,
    assert_every_request_valid,
    child_on,
    fork,
    is_child,
    last_results,
    of,
    report,
    requests_matching,
    root,
    system_text,
    turn_of,
    user_texts,
)
from tests.sessions_app.conftest import is_summary_call

pytestmark = pytest.mark.django_db(transaction=True)


def plain(body: dict) -> list[dict]:
    """The request's messages without cache breakpoints and transient blocks (the scratchpad)."""
    messages = []
    for message in body["messages"]:
        content = [
            {k: v for k, v in block.items() if k != "cache_control"}
            for block in message["content"]
            if not (block.get("type") == "text" and block.get("text", "").startswith(BLOCK_START))
        ]
        messages.append({"role": message["role"], "content": content})
    return messages


async def scratchpad_preset(session: dict, notes: str) -> None:
    limits = scratchpad_services.ScratchpadLimits(
        notes_max_chars=4000, plan_max_chars=2000, refs_max_items=50
    )
    await db(scratchpad_services.scratchpad_apply)(
        session_id=uuid.UUID(session["id"]),
        action="set_notes",
        args={"content": notes},
        author="agent",
        limits=limits,
    )


async def test_forks_first_request_holds_the_parents_earlier_messages_notepad_and_scratchpad(
    connect, model_servers
):
    strict_anthropic = model_servers(strict=True).fake
    router = (
        Router()
        .on(child_on("Check the EMEA rows."), report("rows 251-267 are duplicates"))
        .on(
            root,
            text("Sheet 1 has 500 rows."),
            tool_use("read_notepad", {}, id="toolu_read"),
            tool_use("fork_session", {"task": "Check the EMEA rows."}, id="toolu_fork", text="Forking."),
            text("The fork found duplicates."),
        )
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=model_servers.model, system_prompt="You analyse spreadsheets.")
    await notepad_preset(session, "## Findings\n- Q3 gap in EMEA\n")
    await scratchpad_preset(session, "looking at EMEA")
    await turn_of(client, session, "How many rows?")
    frames = await turn_of(client, session, "Find the Q3 gap.")

    parent_before_fork = plain(requests_matching(strict_anthropic, root)[2])
    (fork_first,) = requests_matching(strict_anthropic, is_child)
    # Everything the parent's model had when it asked for the fork, then the task.
    assert plain(fork_first)[:-1] == parent_before_fork[:-1]
    assert plain(fork_first)[-1] == {
        "role": "user",
        "content": [*parent_before_fork[-1]["content"], {"type": "text", "text": "Check the EMEA rows."}],
    }
    assert [m["role"] for m in plain(fork_first)] == ["user", "assistant", "user", "assistant", "user"]
    assert user_texts(fork_first)[:2] == ["How many rows?", "Find the Q3 gap."]
    # Not the assistant message holding the fork call itself.
    assert "toolu_fork" not in json.dumps(fork_first["messages"])
    assert f"{NOTEPAD_HEADING}\n## Findings\n- Q3 gap in EMEA\n" in system_text(fork_first)
    assert system_text(fork_first).startswith("You analyse spreadsheets.")
    assert any(t.startswith(BLOCK_START) and "looking at EMEA" in t for t in user_texts(fork_first))

    (block,) = last_results(requests_matching(strict_anthropic, root)[-1])
    outcome = json.loads(block["content"])
    assert (outcome["status"], outcome["result"]) == ("reported", "rows 251-267 are duplicates")
    (spawned,) = of(frames, session["id"], "session.spawned")
    assert (spawned["mode"], spawned["tool_use_id"]) == ("fork", "toolu_fork")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


async def test_forks_copied_messages_are_its_own_and_the_parents_history_is_untouched(
    connect, strict_anthropic
):
    router = (
        Router()
        .on(child_on("Side work."), tool_use("write_notepad", {"content": "fork notes"}), report("done"))
        .on(root, fork("Side work."), text("ok"), text("next"))
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings={"scratchpad": {"enabled": False}})
    await notepad_preset(session, "parent notes")
    await turn_of(client, session, "Go.")
    await turn_of(client, session, "Next.")
    parent = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    child = await sync_to_async(AgentSession.objects.get)(parent_session=parent)
    copied = await alist(Message.objects.filter(session=child).order_by("position"))
    assert copied[0].metadata == {"type": "forked", "from_session": session["id"], "from_position": 0}
    assert [m.position for m in copied] == list(range(len(copied)))
    assert (parent.notepad, child.notepad) == ("parent notes", "fork notes")
    last = requests_matching(strict_anthropic, root)[-1]
    assert "fork notes" not in system_text(last) and "parent notes" in system_text(last)
    await client.close()


async def test_two_forks_of_one_step_both_start_before_that_step(connect, strict_anthropic):
    both = Reply(
        [
            {"type": "tool_use", "id": "toolu_f1", "name": "fork_session", "input": {"task": "Left."}},
            {"type": "tool_use", "id": "toolu_f2", "name": "fork_session", "input": {"task": "Right."}},
        ],
        stop_reason="tool_use",
    )
    router = (
        Router()
        .on(child_on("Left."), report("L"))
        .on(child_on("Right."), report("R"))
        .on(root, both, text("ok"))
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, settings={"scratchpad": {"enabled": False}})
    frames = await turn_of(client, session, "Split it.")
    for body in requests_matching(strict_anthropic, is_child):
        assert "toolu_f1" not in json.dumps(body["messages"]) and "toolu_f2" not in json.dumps(
            body["messages"]
        )
    results = last_results(requests_matching(strict_anthropic, root)[-1])
    assert [json.loads(b["content"])["result"] for b in results] == ["L", "R"]
    assert frames[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


# -- the copy never holds an orphan tool_use (pure) ----------------------------------------------
def use(i: str) -> dict:
    return {"type": "tool_use", "id": i, "name": "t", "input": {}}


def result(i: str) -> dict:
    return {"type": "tool_result", "tool_use_id": i, "content": "x"}


def words(s: str) -> dict:
    return {"type": "text", "text": s}


def test_answered_tool_calls_are_kept():
    messages = [("user", [words("a")]), ("assistant", [use("1")]), ("user", [result("1")])]
    assert tool_pairs_complete(messages) == [c for _, c in messages]


def test_an_unanswered_tool_use_and_an_unasked_tool_result_are_taken_out():
    messages = [
        ("user", [words("a")]),
        ("assistant", [words("calling"), use("1"), use("2")]),
        ("user", [result("1"), result("9")]),
    ]
    assert tool_pairs_complete(messages) == [
        [words("a")],
        [words("calling"), use("1")],
        [result("1")],
    ]


def test_a_trailing_tool_use_is_taken_out_and_an_emptied_message_left_empty():
    messages = [("user", [words("a")]), ("assistant", [use("1")])]
    assert tool_pairs_complete(messages) == [[words("a")], []]


def test_results_split_over_two_stored_user_messages_answer_one_turn():
    messages = [
        ("user", [words("a")]),
        ("assistant", [use("1"), use("2")]),
        ("user", [result("1")]),
        ("user", [result("2"), words("b")]),
    ]
    assert tool_pairs_complete(messages) == [c for _, c in messages]


async def test_a_fork_over_its_threshold_compacts_its_own_history(connect, model_servers):
    strict_anthropic = model_servers(strict=True).fake
    filler = "palimpsest " * 300  # about 900 tokens
    task = f"Check this: {filler}"
    router = (
        Router()
        .on(
            is_summary_call,
            text("summary"),
            text("summary"),
        )
        .on(child_on(task), text("Notepad is up to date."), report("checked"))
        .on(lambda body: root(body) and user_texts(body)[-1] == "Fork it.", fork(task))
    )
    strict_anthropic.default_reply = router
    client = await connect()
    # The parent stays under the threshold when it forks (with `recall`, offered once it has an
    # archive), its fork, which adds the task, goes over it.
    session = await client.create(
        model=model_servers.model,
        context_window=10_000,
        compact_threshold=0.32,
        settings={"scratchpad": {"enabled": False}},
    )
    for index in range(2):
        await turn_of(client, session, f"message {index}: {filler}")
    frames = await turn_of(client, session, "Fork it.")
    child_id = of(frames, session["id"], "session.spawned")[0]["child_session_id"]
    (completed,) = of(frames, child_id, "compaction.completed")
    assert completed["epoch"] == 1
    child = await sync_to_async(AgentSession.objects.get)(pk=child_id)
    assert child.epoch == 1
    assert await sync_to_async(Archive.objects.filter(session=child).count)() == 1
    outcome = json.loads(last_results(requests_matching(strict_anthropic, root)[-1])[0]["content"])
    assert (outcome["status"], outcome["result"]) == ("reported", "checked")
    assert frames[-1]["stop_reason"] == "end_turn"
    assert_every_request_valid(strict_anthropic)
    await client.close()


async def test_a_forks_first_request_shows_finished_tasks_collapsed_and_masked_results_masked(
    connect, strict_anthropic
):
    """DESIGN.md: a fork gets the history "as the model sees it". A task finished before the fork
    stays collapsed, and a result that compaction masked stays masked, in the fork's first
    request exactly as in the parent's own request that asked for the fork."""
    router = (
        Router()
        .on(child_on("Check the EMEA rows."), report("done"))
        .on(
            root,
            tool_use("begin_task", {"name": "count rows", "goal": "How many rows?"}, id="toolu_begin"),
            tool_use("read_notepad", {}, id="toolu_inner"),
            tool_use("end_task", {"summary": "Sheet 1 has 500 rows."}, id="toolu_end"),
            text("500 rows."),
            tool_use("read_notepad", {}, id="toolu_big"),
            text("Read it."),
            tool_use("fork_session", {"task": "Check the EMEA rows."}, id="toolu_fork"),
            text("Forked."),
        )
    )
    strict_anthropic.default_reply = router
    client = await connect()
    session = await client.create(model=MODEL, system_prompt="You analyse spreadsheets.")
    await notepad_preset(session, "## Findings\n- Q3 gap in EMEA\n")
    await turn_of(client, session, "How many rows?")
    await turn_of(client, session, "Read the notepad.")
    session_id = uuid.UUID(session["id"])
    await db(_mask)(session_id, "toolu_big")
    await turn_of(client, session, "Fork it.")

    parent_asks = plain(requests_matching(strict_anthropic, root)[-2])
    (fork_first,) = requests_matching(strict_anthropic, is_child)
    assert "toolu_inner" not in json.dumps(parent_asks)  # the parent's view: collapsed
    assert "[masked for the test]" in json.dumps(parent_asks)
    assert plain(fork_first)[:-1] == parent_asks[:-1]
    assert plain(fork_first)[-1]["content"][:-1] == parent_asks[-1]["content"]
    assert_every_request_valid(strict_anthropic)
    await client.close()


def _mask(session_id: uuid.UUID, tool_use_id: str) -> None:
    """Mask a stored tool result as compaction's cheap tier does (its row, then the process's
    prepared history read again)."""
    from sessions_app.engine.history import history_forget
    from sessions_app.models import MaskedResult

    session = AgentSession.objects.get(pk=session_id)
    MaskedResult.objects.create(
        session_id=session_id,
        epoch=session.epoch,
        tool_use_id=tool_use_id,
        size_chars=100,
        placeholder="[masked for the test]",
    )
    history_forget(session_id)
