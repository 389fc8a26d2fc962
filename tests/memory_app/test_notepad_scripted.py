"""The scripted model uses its notepad: `remember:`, `forget:`, `notepad`."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.notepad.scripted import NOTEPAD_OFF_REPLY
from sessions_app.engine.features import features
from tests.memory_app.notepad_support import notepad_preset, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_scratchpad")]


def calls(frames: list[dict]) -> list[tuple[str, dict]]:
    return [(f["name"], f["input"]) for f in frames if f["type"] == "tool.call"]


def notepad_after(frames: list[dict]) -> str:
    return [f for f in frames if f["type"] == "notepad.updated"][-1]["content"]


def last_answer(frames: list[dict]) -> str:
    return [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"]


async def test_remember_appends_the_text_as_a_line(connect: Any) -> None:
    client = await connect()
    await client.create()
    frames = await turn(client, "remember: Q3 gap is in EMEA rows 234-267")
    assert calls(frames) == [
        ("update_notepad", {"operation": "append", "content": "Q3 gap is in EMEA rows 234-267\n"})
    ]
    assert notepad_after(frames) == "Q3 gap is in EMEA rows 234-267\n"


async def test_remember_reports_the_tool_result(connect: Any) -> None:
    client = await connect()
    await client.create()
    frames = await turn(client, "remember: milk")
    assert last_answer(frames) == 'update_notepad returned: {"ok": true}'


async def test_forget_deletes_the_line_remember_wrote(connect: Any) -> None:
    client = await connect()
    await client.create()
    await turn(client, "remember: milk")
    await turn(client, "remember: eggs")
    frames = await turn(client, "forget: milk")
    assert calls(frames) == [("update_notepad", {"operation": "delete", "content": "milk\n"})]
    assert notepad_after(frames) == "eggs\n"


async def test_forget_deletes_the_whole_line_that_contains_the_text(connect: Any) -> None:
    client = await connect()
    await client.create()
    await turn(client, "remember: Q3 totals are wrong in row 12")
    await turn(client, "remember: eggs")
    frames = await turn(client, "forget: Q3 totals")
    assert calls(frames) == [
        ("update_notepad", {"operation": "delete", "content": "Q3 totals are wrong in row 12\n"})
    ]
    assert notepad_after(frames) == "eggs\n"


async def test_forget_deletes_every_line_that_contains_the_text(connect: Any) -> None:
    client = await connect()
    session = await client.create()
    await notepad_preset(session, "Q3 totals\nkeep me\nold Q3 totals\nlast Q3 line")
    frames = await turn(client, "forget: Q3")
    assert notepad_after(frames) == "keep me\n"
    assert last_answer(frames).count("update_notepad returned") == 3


async def test_forget_deletes_a_last_line_without_its_newline(connect: Any) -> None:
    client = await connect()
    session = await client.create()
    await notepad_preset(session, "buy milk and eggs")
    frames = await turn(client, "forget: and eggs")
    assert calls(frames) == [("update_notepad", {"operation": "delete", "content": "buy milk and eggs"})]
    assert notepad_after(frames) == ""


async def test_forget_does_not_take_the_empty_notepad_hint_for_a_note(connect: Any) -> None:
    client = await connect()
    await client.create()
    frames = await turn(client, "forget: write_notepad")
    assert calls(frames) == [("update_notepad", {"operation": "delete", "content": "write_notepad"})]


async def test_forget_reads_the_notepad_in_message_position_too(connect: Any) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"position": "message"}})
    await turn(client, "remember: milk")
    frames = await turn(client, "forget: milk")
    assert calls(frames) == [("update_notepad", {"operation": "delete", "content": "milk\n"})]


async def test_forget_deletes_the_whole_line_in_message_position_too(connect: Any) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"position": "message"}})
    await turn(client, "remember: Q3 totals are wrong in row 12")
    frames = await turn(client, "forget: Q3 totals")
    # The notepad is its own block there: the user's words after it ("forget: Q3 totals") are no note.
    assert calls(frames) == [
        ("update_notepad", {"operation": "delete", "content": "Q3 totals are wrong in row 12\n"})
    ]
    assert notepad_after(frames) == ""


async def test_forget_of_absent_text_reports_the_tool_error(connect: Any) -> None:
    client = await connect()
    await client.create()
    frames = await turn(client, "forget: unicorns")
    assert last_answer(frames).startswith('update_notepad failed: The "content" to delete does not occur')


async def test_notepad_reads_the_notepad(connect: Any) -> None:
    client = await connect()
    session = await client.create()
    await notepad_preset(session, "plan")
    frames = await turn(client, "notepad")
    assert (calls(frames), last_answer(frames)) == (
        [("read_notepad", {})],
        'read_notepad returned: {"content": "plan"}',
    )


async def test_notepad_commands_say_the_notepad_is_off_when_it_is(connect: Any) -> None:
    client = await connect()
    await client.create(settings={"notepad": {"enabled": False}})
    frames = await turn(client, "remember: milk")
    assert (calls(frames), last_answer(frames)) == ([], NOTEPAD_OFF_REPLY)


async def test_help_lists_the_notepad_commands() -> None:
    assert [line.split(":")[0] for line in features().help_lines() if "notepad" in line] == [
        "remember",
        "forget",
        "notepad",
    ]
