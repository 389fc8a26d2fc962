"""A long single turn compacts its own older steps (issue 31 item 8): when masking cannot make room,
the running turn's older steps are summarized into one note inside the turn, its user's request
and its newest steps stay verbatim, and the summarized steps are archived. Through the fake
Messages API in strict mode (every request must be one the real API accepts, and fit its window)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine.prompts import PRE_COMPACTION_WARNING, TURN_SUMMARY_MESSAGE
from sessions_app.models import Archive, Message
from tests.conftest import alist, chat
from tests.fake_anthropic import FakeAnthropicServer, Reply, strict_problems, text, tool_use
from tests.memory_app.subsessions_support import (
    Router,
    child_on,
    is_child,
    of,
    requests_matching,
    root,
    spawn,
    turn_of,
)
from tests.sessions_app.conftest import NO_MEMORY

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
WINDOW = 12_000
STEPS = 20
REQUEST = "Go through the twenty sheets and write up each one."
TURN_NOTE_HEAD = TURN_SUMMARY_MESSAGE.split("{summary}")[0]


def step_text(number: int) -> str:
    """About 4,000 characters (about 1,000 tokens) of findings for step `number`."""
    line = "".join(
        f"Sheet {number} row {j}: value {j * 7919 % 10007}, flagged {j % 3 == 0}. " for j in range(80)
    )
    return f"STEP {number:02d} " + line[:3990]


def is_summary(body: dict) -> bool:
    system = body.get("system")
    return isinstance(system, str) and system.startswith("Summarize this conversation")


def last_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    block = content[-1] if isinstance(content, list) else {"type": "text", "text": content}
    return str(block.get("text", ""))


def steps_seen(body: dict) -> list[int]:
    """The numbers of the steps whose text the request holds verbatim."""
    found = []
    for message in body["messages"]:
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block.get("type") == "text" and block["text"].startswith("STEP "):
                found.append(int(block["text"][5:7]))
    return found


class TextHeavy:
    """A model that makes STEPS steps of about 4,000 characters of text each (each with a cheap
    tool call, so the turn goes on), then answers `done`; it says the notepad is up to date when
    warned. Summary calls answer a short summary."""

    def __init__(self, tool: str, tool_input: dict[str, Any]) -> None:
        self.tool, self.tool_input = tool, tool_input
        self.made = 0
        self.summaries: list[dict] = []

    def __call__(self, body: dict) -> Reply:
        if is_summary(body):
            self.summaries.append(body)
            return text(f"Steps summarized (call {len(self.summaries)}).")
        if last_text(body) == PRE_COMPACTION_WARNING:
            return text("Notepad is up to date.")
        if self.made >= STEPS:
            return text("done")
        self.made += 1
        return tool_use(self.tool, dict(self.tool_input), text=step_text(self.made))


def assert_requests_valid_and_fit(fake: FakeAnthropicServer) -> None:
    for record in fake.requests:
        assert strict_problems(record.body) == [], record.body["messages"]
        if record.prompt_tokens is not None and not is_summary(record.body):
            assert record.prompt_tokens + record.body["max_tokens"] <= WINDOW


async def test_a_root_turn_of_twenty_text_heavy_steps_completes_by_summarizing_its_own_older_steps(
    connect, model_servers, echo_tool
):
    fake = model_servers(strict=True, window=WINDOW).fake
    model = TextHeavy("test_echo", {"text": "ok"})
    fake.default_reply = model
    client = await connect()
    await client.create(
        model=model_servers.model,
        context_window=WINDOW,
        compact_threshold=0.6,
        settings={**NO_MEMORY, "max_steps_per_turn": 40},
    )
    frames = await chat(client, REQUEST)

    assert not [f for f in frames if f["type"] == "error"], [f for f in frames if f["type"] == "error"]
    assert frames[-1]["stop_reason"] == "end_turn"
    assert model.made == STEPS
    completed = [f for f in frames if f["type"] == "compaction.completed"]
    assert completed and all(f["kind"] == "turn" for f in completed)
    assert_requests_valid_and_fit(fake)
    # Every request of the turn starts with the user's request, verbatim, and holds its newest
    # steps verbatim; after a compaction, the note summarizing the older ones follows the request.
    turn_requests = [r.body for r in fake.requests if not is_summary(r.body)]
    for body in turn_requests:
        first = body["messages"][0]["content"]
        assert first[0]["text"] == REQUEST
    last = turn_requests[-1]
    assert last["messages"][0]["content"][1]["text"].startswith(TURN_NOTE_HEAD)
    seen = steps_seen(last)
    assert seen == list(range(seen[0], STEPS + 1)) and len(seen) >= 2  # the newest, in order
    assert 1 not in seen
    # The summarized steps are in the archives, whole.
    archived = await alist(
        Message.objects.filter(epoch__lt=len(completed), role="assistant").values_list("content", flat=True)
    )
    archived_steps = {b["text"] for content in archived for b in content if b.get("type") == "text"}
    assert {step_text(n) for n in range(1, seen[0])} <= archived_steps
    archives = await alist(Archive.objects.order_by("epoch").values_list("kind", flat=True))
    assert archives == ["turn"] * len(completed)


async def test_the_summarized_steps_are_readable_with_session_archive_read(connect, strict_fake, echo_tool):
    fake = strict_fake(WINDOW)
    model = TextHeavy("test_echo", {"text": "ok"})
    reads: list[dict] = []

    def reply(body: dict) -> Reply:
        if not is_summary(body) and model.made == STEPS and not reads:
            reads.append(body)
            return tool_use("session_archive_read", {"query": "row 5: value", "limit": 1})
        return model(body)

    fake.default_reply = reply
    client = await connect()
    await client.create(
        model=MODEL,
        context_window=WINDOW,
        compact_threshold=0.6,
        settings={**NO_MEMORY, "max_steps_per_turn": 40},
    )
    frames = await chat(client, REQUEST)
    result = next(f for f in frames if f["type"] == "tool.result" and f["name"] == "session_archive_read")
    assert not result["is_error"], result["content"]
    assert "STEP " in result["content"]
    assert frames[-1]["stop_reason"] == "end_turn"


async def test_a_child_doing_text_heavy_work_compacts_its_turn_and_reports(connect, model_servers):
    fake = model_servers(strict=True, window=WINDOW).fake
    task = "Write up the twenty sheets."
    child = TextHeavy("read_notepad", {})

    def child_reply(body: dict) -> Reply:
        reply = child(body)
        if not is_summary(body) and reply.content == text("done").content:
            return tool_use("report_result", {"result": "twenty sheets written up"})
        return reply

    router = Router().on(child_on(task), *[child_reply] * 60).on(root, spawn(task), text("Reported."))

    def route(body: dict) -> Reply:
        return child(body) if is_summary(body) else router(body)

    fake.default_reply = route
    client = await connect()
    session = await client.create(
        model=model_servers.model,
        context_window=WINDOW,
        compact_threshold=0.6,
        settings={"scratchpad": {"enabled": False}, "max_steps_per_turn": 40},
    )
    frames = await turn_of(client, session, "Delegate the write-up.")
    spawned = of(frames, session["id"], "session.spawned")[0]
    child_id = spawned["child_session_id"]
    assert not of(frames, child_id, "error"), of(frames, child_id, "error")
    assert of(frames, child_id, "turn.completed")[0]["stop_reason"] == "end_turn"
    assert child.made == STEPS
    assert [f["kind"] for f in of(frames, child_id, "compaction.completed")]
    parent_last = requests_matching(fake, root)[-1]
    assert '"status": "reported"' in str(parent_last["messages"][-1]["content"][0]["content"])
    for body in requests_matching(fake, is_child):
        assert body["messages"][0]["content"][0]["text"] == task
    assert_requests_valid_and_fit(fake)
    assert await sync_to_async(Archive.objects.filter(session_id=child_id, kind="turn").count)() >= 1


def test_the_dashboard_shows_a_turns_note_as_its_compaction_and_not_the_copied_summary_again():
    from sessions_app.dashboard import transcript

    archive = Archive(
        summary="Steps 1 to 5 done.",
        trigger="threshold",
        kept_messages=4,
        kind="turn",
        tokens_before=9000,
        tokens_after=5000,
    )
    archive.id = "00000000-0000-0000-0000-000000000001"
    note = Message(
        position=9,
        epoch=2,
        role="user",
        content=[{"type": "text", "text": TURN_SUMMARY_MESSAGE.format(summary="Steps 1 to 5 done.")}],
        metadata={"type": "turn_summary", "previous_archive": str(archive.id)},
    )
    copy = Message(
        position=7,
        epoch=2,
        role="user",
        content=[{"type": "text", "text": "[Summary of the conversation so far. ...]\n\nS1"}],
        metadata={"type": "compact", "previous_archive": "earlier", "from_position": 3},
    )
    summaries = {str(archive.id): archive}
    assert transcript.archive_ids([note, copy]) == {str(archive.id), "earlier"}
    (item,) = transcript.items_from_message(note, tool_names={}, summaries=summaries)
    assert item.kind == transcript.COMPACTION and item.text == "Steps 1 to 5 done."
    assert "the running turn's older steps summarized, 4 messages kept" in item.receipt
    assert transcript.items_from_message(copy, tool_names={}, summaries=summaries) == []
