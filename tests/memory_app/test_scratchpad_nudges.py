"""The four nudges of seed 003 (PROTOCOL.md setting names, off by default): each a `[Hint: ...]`
line before the user's message, as the model receives it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.scratchpad import prompts
from memory_app.scratchpad.selectors import plan_detected
from sessions_app.models import AgentSession
from tests.conftest import Client
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.scratchpad_support import TOOL, bodies, latest_user, open_session, run_turn, seed, texts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_notepad")]

PLAN_REPLY = "Here is my plan:\n1. Read the code\n2. Fix the bug\n3. Add a test"


def nudges(**values: int) -> dict:
    return {"settings": {"scratchpad": values}}


def hints_in(body: dict) -> list[str]:
    """The hint lines anywhere in the request's messages."""
    return [
        line
        for message in body["messages"]
        for t in texts(message)
        for line in t.splitlines()
        if line.startswith("[Hint:")
    ]


async def turns(client: Client, fake: FakeAnthropicServer, *replies: str) -> None:
    for reply in replies:
        fake.enqueue(text(reply))
        await run_turn(client, "next")


async def bump_epoch(session_id: uuid.UUID) -> None:
    """What a compaction does to the session (compaction itself is another feature)."""
    await sync_to_async(AgentSession.objects.filter(pk=session_id).update)(epoch=1)


# ---------------------------------------------------------------------------
# off by default
# ---------------------------------------------------------------------------
async def test_no_hints_by_default(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await turns(client, fake_anthropic, PLAN_REPLY, PLAN_REPLY, PLAN_REPLY)
    await bump_epoch(session_id)
    await turns(client, fake_anthropic, "ok")

    assert all(hints_in(body) == [] for body in bodies(fake_anthropic))


# ---------------------------------------------------------------------------
# nudge_after_turns
# ---------------------------------------------------------------------------
async def test_after_turns_hint_once_n_turns_passed_with_an_empty_scratchpad(
    connect: Any, fake_anthropic: Any
) -> None:
    client, _ = await open_session(connect, **nudges(nudge_after_turns=2))

    await turns(client, fake_anthropic, "a", "b", "c")

    first, second, third = bodies(fake_anthropic)
    assert hints_in(first) == hints_in(second) == []
    assert hints_in(third) == [prompts.HINT_AFTER_TURNS.format(turns=2)]


async def test_after_one_turn_the_hint_says_1_turn_has_passed(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_after_turns=1))

    await turns(client, fake_anthropic, "a", "b")

    second = bodies(fake_anthropic)[1]
    assert hints_in(second) == [prompts.HINT_AFTER_ONE_TURN]
    assert "[Hint: 1 turn has passed and your scratchpad is empty." in hints_in(second)[0]


async def test_after_turns_no_hint_when_the_scratchpad_has_content(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **nudges(nudge_after_turns=1))
    await seed(session_id, {"action": "refs.add", "ref": "src/a.py"})

    await turns(client, fake_anthropic, "a", "b")

    assert hints_in(bodies(fake_anthropic)[1]) == []


# ---------------------------------------------------------------------------
# nudge_on_plan_detected
# ---------------------------------------------------------------------------
async def test_plan_hint_after_a_plan_like_reply_while_scratchpad_is_empty(
    connect: Any, fake_anthropic: Any
) -> None:
    client, _ = await open_session(connect, **nudges(nudge_on_plan_detected=1))

    await turns(client, fake_anthropic, PLAN_REPLY, "ok")

    first, second = bodies(fake_anthropic)
    assert hints_in(first) == []
    assert hints_in(second) == [prompts.HINT_PLAN_DETECTED]


async def test_no_plan_hint_after_a_reply_without_a_plan(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_on_plan_detected=1))

    await turns(client, fake_anthropic, "1. only\n2. two items", "ok")

    assert hints_in(bodies(fake_anthropic)[1]) == []


async def test_no_plan_hint_when_the_scratchpad_has_content(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **nudges(nudge_on_plan_detected=1))
    await seed(session_id, {"action": "set_notes", "content": "something"})

    await turns(client, fake_anthropic, PLAN_REPLY, "ok")

    assert hints_in(bodies(fake_anthropic)[1]) == []


@pytest.mark.parametrize(
    "reply",
    [
        "1. a\n2. b\n3. c",
        "Plan:\n  1) a\n  2) b\n  3) c",
        "Step 1: read\nStep 2: fix\nStep 3: test",
        "**Phase 1** x\n**Phase 2** y\n## Phase 3 z",
        "stage 1\nstage 2\nstage 3",
        "- [ ] read\n- [ ] fix\n- [x] test",
    ],
)
def test_plan_detected_in_plan_like_text(reply: str) -> None:
    assert plan_detected(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "1. a\n2. b",
        "Step 1 then step 2 then step 3, all on one line",
        "- [ ] one\n- [ ] two",
        "- read\n- fix\n- test",
        "The year 2024. Version 3. Chapter 1.",
    ],
)
def test_plan_not_detected_in_other_text(reply: str) -> None:
    assert not plan_detected(reply)


# ---------------------------------------------------------------------------
# nudge_after_compaction
# ---------------------------------------------------------------------------
async def test_compaction_hint_on_the_first_call_after_the_epoch_changed(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(connect, **nudges(nudge_after_compaction=1))
    await turns(client, fake_anthropic, "a")
    await bump_epoch(session_id)

    await turns(client, fake_anthropic, "b", "c")

    before, after, later = bodies(fake_anthropic)
    assert hints_in(before) == []
    assert hints_in(after) == [prompts.HINT_AFTER_COMPACTION]
    assert hints_in(later) == []


async def test_compaction_hint_also_when_the_scratchpad_has_content(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(connect, **nudges(nudge_after_compaction=1))
    await seed(session_id, {"action": "set_plan", "content": "1. go"})
    await bump_epoch(session_id)

    await turns(client, fake_anthropic, "a")

    assert hints_in(bodies(fake_anthropic)[0]) == [prompts.HINT_AFTER_COMPACTION]


# ---------------------------------------------------------------------------
# nudge_turns_since_last_use
# ---------------------------------------------------------------------------
async def test_stale_hint_when_content_is_unchanged_for_n_turns(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_turns_since_last_use=2))
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "n"}), text("ok"))
    await run_turn(client, "turn 1 writes")

    await turns(client, fake_anthropic, "turn 2", "turn 3", "turn 4")

    requests = bodies(fake_anthropic)  # turn 1 made two calls
    assert [hints_in(b) for b in requests[2:4]] == [[], []]
    assert hints_in(requests[4]) == [prompts.HINT_STALE.format(turns=2)]


async def test_stale_hint_after_one_turn_says_1_turn(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_turns_since_last_use=1))
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "n"}), text("ok"))
    await run_turn(client, "turn 1 writes")

    await turns(client, fake_anthropic, "turn 2", "turn 3")

    requests = bodies(fake_anthropic)
    assert hints_in(requests[3]) == [prompts.HINT_STALE_ONE_TURN]
    assert "has not changed for 1 turn." in hints_in(requests[3])[0]
    assert hints_in(requests[2]) == []


async def test_stale_count_restarts_when_content_changes(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_turns_since_last_use=2))
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "set_notes", "content": "n"}), text("ok"))
    await run_turn(client, "turn 1 writes")
    await turns(client, fake_anthropic, "turn 2")
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "append_notes", "content": "m"}), text("ok"))
    await run_turn(client, "turn 3 writes")

    await turns(client, fake_anthropic, "turn 4", "turn 5")

    requests = bodies(fake_anthropic)
    assert [hints_in(b) for b in requests] == [[]] * len(requests)


async def test_no_stale_hint_for_an_empty_scratchpad(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_turns_since_last_use=1))

    await turns(client, fake_anthropic, "a", "b", "c")

    assert all(hints_in(body) == [] for body in bodies(fake_anthropic))


# ---------------------------------------------------------------------------
# where hints go
# ---------------------------------------------------------------------------
async def test_hints_come_before_the_block_in_the_latest_user_message(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(
        connect, **nudges(nudge_turns_since_last_use=1, nudge_after_compaction=1)
    )
    await turns(client, fake_anthropic, "a")
    await seed(session_id, {"action": "set_notes", "content": "n"})
    await turns(client, fake_anthropic, "b")
    await bump_epoch(session_id)

    await turns(client, fake_anthropic, "c")

    hints, block, words = texts(latest_user(bodies(fake_anthropic)[-1]))
    assert hints == prompts.HINT_AFTER_COMPACTION + "\n" + prompts.HINT_STALE_ONE_TURN
    assert block.startswith(prompts.BLOCK_START)
    assert words == "next"


async def test_turn_hints_go_only_with_the_users_message(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_after_turns=1))
    await turns(client, fake_anthropic, "a")
    fake_anthropic.enqueue(tool_use("no_such_tool", {}), text("ok"))

    await run_turn(client, "b")

    with_user_words, after_tool_result = bodies(fake_anthropic)[1:]
    assert hints_in(with_user_words) == [prompts.HINT_AFTER_ONE_TURN]
    assert hints_in(after_tool_result) == []


async def test_hints_are_never_stored(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect, **nudges(nudge_after_turns=1))

    await turns(client, fake_anthropic, "a", "b", "c")

    # The second turn's hint is gone from its user message in the third request.
    third = bodies(fake_anthropic)[2]
    assert hints_in(third) == [prompts.HINT_AFTER_TURNS.format(turns=2)]
    assert [texts(m) for m in third["messages"] if m["role"] == "user"][:-1] == [["next"], ["next"]]


async def test_no_hints_when_the_scratchpad_is_switched_off(connect: Any, fake_anthropic: Any) -> None:
    settings = {"scratchpad": {"enabled": False, "nudge_after_turns": 1, "nudge_after_compaction": 1}}
    client, session_id = await open_session(connect, settings=settings)
    await turns(client, fake_anthropic, "a")
    await bump_epoch(session_id)

    await turns(client, fake_anthropic, "b")

    assert all(hints_in(body) == [] for body in bodies(fake_anthropic))
