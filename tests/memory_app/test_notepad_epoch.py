"""The notepad's cache-aware position `epoch` (DESIGN.md, issue 32): the system prompt holds the
notepad as of the epoch's start, inside the cached prefix; once it changes, the current one is
shown with the latest message under the same heading, the last `## Session Notepad` the model
reads; a compaction pins the new notepad. The engine's pins (`AgentSession.context_pins`) outlive
the turn that took them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad.prompts import NOTEPAD_CHANGED_LEAD, NOTEPAD_EMPTY_HINT, NOTEPAD_GUIDANCE
from sessions_app.engine import runner
from sessions_app.engine.context import CACHE_CONTROL
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.models import AgentSession
from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.notepad_support import notepad_preset, turn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("without_scratchpad", "without_tasks"),
]

EPOCH = {"notepad": {"position": "epoch"}}
HINT_SECTION = f"## Session Notepad\n{NOTEPAD_EMPTY_HINT}"


def last_notepad_read(body: dict) -> str:
    """What follows the last `## Session Notepad` heading the model reads (system, then messages)."""
    texts = [b["text"] for b in body.get("system", [])]
    for message in body["messages"]:
        texts += [b["text"] for b in message["content"] if b.get("type") == "text"]
    found = [t for t in texts if "## Session Notepad\n" in t]
    assert found, "no notepad section"
    return found[-1].rsplit("## Session Notepad\n", 1)[1]


def texts_of(message: dict) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


def transient_texts(body: dict) -> list[str]:
    return [b["text"] for b in body["messages"][-1]["content"] if b.get("type") == "text"]


async def test_first_request_pins_the_notepad_after_the_cached_system_prompt(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=EPOCH, system_prompt="Be brief.")
    await notepad_preset(session, "plan: a, b")
    await turn(client, "hello")
    body = fake_anthropic.requests[0].body
    # The breakpoint ends the session's own stable text (a new epoch reads it from the cache);
    # the pinned notepad follows, inside the prefix the history's breakpoints cache.
    assert body["system"] == [
        {"type": "text", "text": f"Be brief.\n\n{NOTEPAD_GUIDANCE}", "cache_control": CACHE_CONTROL},
        {"type": "text", "text": "## Session Notepad\nplan: a, b"},
    ]
    assert transient_texts(body) == ["hello"]
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    assert row.context_pins["epoch"] == 0
    # Every section is pinned, those with nothing to pin as nothing: switching one on inside the
    # epoch then leaves the system prompt as it is.
    assert row.context_pins["sections"]["notepad"] == ["## Session Notepad\nplan: a, b"]
    assert set(row.context_pins["sections"]) == {"notepad", "scratchpad", "subsessions", "tasks"}


async def test_an_edit_leaves_the_prefix_and_shows_the_current_notepad_with_the_latest_message(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=EPOCH)
    fake_anthropic.enqueue(
        tool_use("update_notepad", {"operation": "append", "content": "found it\n"}),
        tool_use("read_notepad", {}),
        text("done"),
    )
    await turn(client)
    first, second, third = (r.body for r in fake_anthropic.requests)
    assert first["tools"] == second["tools"] == third["tools"]
    assert first["system"] == second["system"] == third["system"]
    assert last_notepad_read(first) == NOTEPAD_EMPTY_HINT
    # After the edit: the system prompt's copy is the epoch's, the current one comes last.
    current = f"{NOTEPAD_CHANGED_LEAD}\n\n## Session Notepad\nfound it\n"
    assert transient_texts(second) == [current]
    assert last_notepad_read(second) == last_notepad_read(third) == "found it\n"
    # The words saying which copy is current come before the heading: the content starts on the
    # heading's next line, as in the system prompt.
    assert current.index(NOTEPAD_CHANGED_LEAD) < current.index("## Session Notepad")
    # The copy is anchored where it was first shown, after the edit's result: the history's last
    # breakpoint ends it, and the next request shows it there again (so the cache reads it) and
    # not with its own latest message.
    blocks = second["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]
    assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == CACHE_CONTROL
    again = third["messages"][len(second["messages"]) - 1]["content"]
    assert [b.get("text") for b in again] == [None, current]
    assert transient_texts(third) == []
    row = await sync_to_async(AgentSession.objects.get)(pk=uuid.UUID(session["id"]))
    assert row.context_pins["anchors"] == [[2, "notepad", ["## Session Notepad\nfound it\n"]]]


async def test_the_pin_outlives_the_turn_and_a_new_turn_still_shows_the_current_notepad(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    await client.create(settings=EPOCH)
    fake_anthropic.enqueue(tool_use("write_notepad", {"content": "v2"}), text("done"), text("again"))
    await turn(client, "one")
    await turn(client, "two")
    later = fake_anthropic.requests[2].body
    assert later["system"] == fake_anthropic.requests[0].body["system"]
    assert later["system"][-1]["text"] == HINT_SECTION
    assert last_notepad_read(later) == "v2"
    # The copy is for this call only: the earlier user message travels as it was stored.
    assert [b["text"] for b in later["messages"][0]["content"]] == ["one"]


async def test_a_notepad_back_to_its_pinned_text_is_shown_again_after_the_copy_that_changed_it(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=EPOCH)
    await notepad_preset(session, "same")
    fake_anthropic.enqueue(
        tool_use("write_notepad", {"content": "other"}),
        tool_use("write_notepad", {"content": "same"}),
        text("done"),
        text("still"),
    )
    await turn(client)
    await turn(client, "again")
    second, third, fourth = (r.body for r in fake_anthropic.requests[1:])
    assert transient_texts(second)[-1].endswith("## Session Notepad\nother")
    # The copy saying "other" stays where it was shown: the pinned text is shown again after it,
    # so that the last notepad the model reads is the current one; then neither is shown again.
    assert last_notepad_read(third) == last_notepad_read(fourth) == "same"
    copies = [t for m in fourth["messages"] for t in texts_of(m) if "## Session Notepad" in t]
    assert len(copies) == 2


async def test_a_compaction_pins_the_notepad_of_the_new_epoch(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    client = await connect()
    session = await client.create(settings=EPOCH)
    fake_anthropic.enqueue(tool_use("write_notepad", {"content": "kept"}), text("done"))
    await turn(client, "one")
    await compaction_operator_start(session_id=uuid.UUID(session["id"]))
    await runner.turns_wait_idle(timeout=10)
    await turn(client, "two")
    after = fake_anthropic.requests[-1].body
    assert after["system"][-1] == {"type": "text", "text": "## Session Notepad\nkept"}
    assert after["system"][0] == fake_anthropic.requests[0].body["system"][0]
    assert not any("Session Notepad" in t for t in transient_texts(after))


async def test_switching_to_epoch_inside_an_epoch_keeps_the_system_prompt(
    connect: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    # Pinned as "nothing" while the position was `message`: the system prompt does not change
    # when the position does; the notepad then comes with the latest message.
    client = await connect()
    await client.create(settings={"notepad": {"position": "message"}})
    await turn(client, "one")
    await client.send({"type": "session.update", "settings": EPOCH})
    await client.until("session.updated")
    await turn(client, "two")
    before, after = (r.body for r in fake_anthropic.requests)
    assert before["system"] == after["system"]
    assert last_notepad_read(after) == NOTEPAD_EMPTY_HINT


async def test_epoch_is_a_valid_position_and_an_unknown_one_is_refused(connect: Any) -> None:
    client = await connect()
    await client.create(settings=EPOCH)
    await client.send({"type": "session.create", "settings": {"notepad": {"position": "sometimes"}}})
    error = await client.until("error")
    assert error[-1]["code"] == "invalid_settings"
    assert "epoch" in error[-1]["message"]
