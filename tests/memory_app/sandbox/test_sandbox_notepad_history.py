"""What one `run_sandbox_code` run may make of the notepad's history: real runs in the real jail
write the notepad many times; each run stores one revision and sends one `notepad.updated`, its
edits stored at once (a timeout or a cancel included), and the session's revisions keep at most
`settings.notepad.history_max_chars` of text."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.db.models import Sum

from memory_app.notepad.models import NotepadRevision
from sessions_app.models import AgentSession, SessionEvent
from tests.fake_anthropic import text, tool_use
from tests.memory_app.notepad_support import turn

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
WRITES = 100
FLOOD = f"for i in range({WRITES}):\n    session.notepad.write(str(i % 10) * 99_000)\nprint('done')\n"


@sync_to_async
def history_of(session_key: str) -> dict:
    """The notepad's stored history and its events: rows, text kept, event rows and their bytes."""
    session_id = uuid.UUID(session_key)
    rows = NotepadRevision.objects.filter(session_id=session_id)
    events = SessionEvent.objects.filter(session_id=session_id, type="notepad.updated")
    session = AgentSession.objects.get(pk=session_id)
    return {
        "rows": rows.count(),
        "kept_chars": rows.aggregate(total=Sum("chars"))["total"] or 0,
        "events": events.count(),
        "event_bytes": sum(len(json.dumps(e.payload)) for e in events),
        "notepad": session.notepad,
        "version": session.notepad_version,
    }


async def run_turn(client, content: str) -> list[dict]:
    """A turn whose runs may take a while to write (no frame comes while the code runs)."""
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed", timeout=120)


def updates(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "notepad.updated"]


async def test_a_flood_of_writes_in_one_run_is_one_revision_and_one_event(connect, fake_anthropic):
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": FLOOD}), text("done"))
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await run_turn(client, "flood")
    result = json.loads(next(f for f in frames if f["type"] == "tool.result")["content"])
    assert result["stdout"] == "done\n"
    stored = await history_of(session["id"])
    # Every write applied (the version counts them); one row and one event hold the last text.
    assert stored["version"] == WRITES and stored["notepad"] == "9" * 99_000
    assert (stored["rows"], stored["kept_chars"]) == (1, 99_000)
    assert stored["events"] == 1 and stored["event_bytes"] < 100_000
    sent = updates(frames)
    assert [(u["version"], u["content"]) for u in sent] == [(WRITES, "9" * 99_000)]


async def test_each_run_is_its_own_revision_and_the_history_keeps_its_bound(connect, fake_anthropic):
    runs = 4
    for _ in range(runs):
        fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": FLOOD}))
    fake_anthropic.enqueue(text("done"))
    client = await connect()
    session = await client.create(model=MODEL, settings={"notepad": {"history_max_chars": 250_000}})
    frames = await run_turn(client, "flood four times")
    assert len(updates(frames)) == runs
    stored = await history_of(session["id"])
    assert stored["version"] == runs * WRITES and stored["events"] == runs
    # A row per run, but only the latest runs' text is kept: two full notepads fit in 250,000.
    assert stored["rows"] == runs and stored["kept_chars"] == 2 * 99_000
    pruned = await sync_to_async(
        NotepadRevision.objects.filter(session_id=session["id"], pruned=True).count
    )()
    assert pruned == runs - 2


async def test_a_run_that_times_out_still_announces_what_it_wrote(connect, fake_anthropic):
    code = "session.notepad.append('a\\n')\nsession.notepad.append('b\\n')\nimport time\ntime.sleep(60)\n"
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code, "timeout_seconds": 2}), text("slow"))
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "slow")
    assert json.loads(next(f for f in frames if f["type"] == "tool.result")["content"])["timed_out"] is True
    assert [(u["version"], u["content"]) for u in updates(frames)] == [(2, "a\nb\n")]
    stored = await history_of(session["id"])
    assert (stored["rows"], stored["events"], stored["notepad"]) == (1, 1, "a\nb\n")


async def test_a_cancelled_run_still_announces_what_it_wrote(connect, fake_anthropic):
    code = "session.notepad.append('before cancel\\n')\nimport time\ntime.sleep(300)\n"
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code, "timeout_seconds": 300}), text("x"))
    client = await connect()
    session = await client.create(model=MODEL, settings={"sandbox": {"timeout_seconds": 300}})
    await client.send({"type": "user.message", "content": "run"})
    await client.until("tool.call")
    for _ in range(200):  # the append is stored once the jail has run it
        if (await history_of(session["id"]))["version"] == 1:
            break
        await __import__("asyncio").sleep(0.05)
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed", timeout=30)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert [(u["version"], u["content"]) for u in updates(frames)] == [(1, "before cancel\n")]
    stored = await history_of(session["id"])
    assert (stored["rows"], stored["events"]) == (1, 1)


async def test_without_edits_a_run_sends_no_notepad_event(connect, fake_anthropic):
    fake_anthropic.enqueue(
        tool_use("run_sandbox_code", {"code": "print(session.notepad.read())"}), text("ok")
    )
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "read")
    assert updates(frames) == []
    assert (await history_of(session["id"]))["rows"] == 0
