"""`session.notepad` inside the jail, carried over the pipe bridge to the server's notepad object."""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad import services as memory_services
from memory_app.notepad.sandbox_api import SessionNotepad
from memory_app.sandbox import bridge
from tests.memory_app.notepad_support import notepad_events, revisions, session_make
from tests.memory_app.sandbox.support import FakeNotepad, run

# Code that talks to the bridge's pipes directly, as hostile code may: `send(raw)` writes bytes to the
# request pipe, `reply()` reads one reply line.
RAW = textwrap.dedent(
    """
    import json, os
    _bridge = session.notepad._bridge
    _replies = os.fdopen(_bridge.reply_fd, "rb", closefd=False)
    def send(raw):
        os.write(_bridge.request_fd, raw)
    def reply():
        return json.loads(_replies.readline())
    """
)


# -- read / write / append ---------------------------------------------------------------------------
async def test_read_returns_the_notepads_content() -> None:
    result = await run("print(session.notepad.read())", notepad=FakeNotepad("# plan\n- step 1"))
    assert result.stdout == "# plan\n- step 1\n"


async def test_write_replaces_the_notepad() -> None:
    notepad = FakeNotepad("old")
    await run("session.notepad.write('new content')", notepad=notepad)
    assert notepad.content == "new content"


async def test_append_adds_the_text_exactly_as_given() -> None:
    notepad = FakeNotepad("a")
    await run("session.notepad.append('b\\n')\nsession.notepad.append('c')", notepad=notepad)
    assert notepad.content == "ab\nc"


async def test_read_sees_the_programs_own_edits() -> None:
    code = "session.notepad.write('x')\nsession.notepad.append('y')\nprint(session.notepad.read())"
    assert (await run(code, notepad=FakeNotepad())).stdout == "xy\n"


async def test_non_ascii_text_goes_through_unchanged() -> None:
    notepad = FakeNotepad()
    await run("session.notepad.write('Zürich → 東京 🚀\\t\\x00end')", notepad=notepad)
    assert notepad.content == "Zürich → 東京 🚀\t\x00end"


async def test_edits_reach_the_notepad_while_the_program_still_runs() -> None:
    notepad = FakeNotepad()
    task = asyncio.create_task(
        run("import time\nsession.notepad.append('step 1 done')\ntime.sleep(600)", notepad=notepad)
    )
    await notepad.seen("step 1 done")
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- refusals ----------------------------------------------------------------------------------------
async def test_a_refused_edit_raises_notepad_error_inside_and_changes_nothing() -> None:
    notepad = FakeNotepad("abc", max_chars=3)
    code = textwrap.dedent(
        """
        try:
            session.notepad.append("d")
        except session.NotepadError as exc:
            print("refused:", exc)
        """
    )
    result = await run(code, notepad=notepad)
    assert result.stdout == "refused: The notepad would be 4 characters, over its limit of 3.\n"
    assert notepad.content == "abc"


async def test_an_uncaught_refusal_ends_the_program_with_its_message() -> None:
    result = await run("session.notepad.append('toolong')", notepad=FakeNotepad(max_chars=3))
    assert result.exit_code == 1 and "NotepadError: The notepad would be 7 characters" in result.stderr


async def test_write_of_a_non_string_is_a_type_error_inside() -> None:
    notepad = FakeNotepad("kept")
    result = await run("session.notepad.write(42)", notepad=notepad)
    assert "TypeError" in result.stderr and notepad.content == "kept" and notepad.calls == []


async def test_without_a_notepad_session_notepad_is_falsy() -> None:
    assert (await run("print(bool(session.notepad))", notepad=None)).stdout == "False\n"


async def test_without_a_notepad_a_call_raises_a_clear_error() -> None:
    result = await run("session.notepad.read()", notepad=None)
    assert "NotepadError: the session notepad is switched off for this session" in result.stderr


async def test_a_forked_child_cannot_use_the_bridge() -> None:
    code = textwrap.dedent(
        """
        import os
        pid = os.fork()
        if pid == 0:
            try:
                session.notepad.append("from child")
            except session.NotepadError as exc:
                print("child:", exc, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        session.notepad.append("from parent")
        """
    )
    notepad = FakeNotepad()
    result = await run(code, notepad=notepad)
    assert result.stdout == "child: session.notepad is only available in the process that started the code\n"
    assert notepad.content == "from parent"


async def test_a_request_over_the_line_limit_is_refused_inside_before_sending(monkeypatch: Any) -> None:
    monkeypatch.setattr(bridge, "BRIDGE_MAX_LINE_BYTES", 1000)
    notepad = FakeNotepad()
    result = await run("session.notepad.write('x' * 2000)", notepad=notepad)
    assert "NotepadError: notepad request too large" in result.stderr and notepad.calls == []


# -- hostile bytes on the pipe -------------------------------------------------------------------------
async def test_a_malformed_line_gets_an_error_reply_and_the_bridge_stays_open() -> None:
    code = RAW + textwrap.dedent(
        """
        send(b"this is not json\\n")
        print(reply())
        session.notepad.append("still works")
        """
    )
    notepad = FakeNotepad()
    result = await run(code, notepad=notepad)
    error = {"id": None, "ok": False, "error": "malformed request: not a JSON line"}
    assert result.stdout == f"{error}\n" and notepad.content == "still works"


@pytest.mark.parametrize(
    ("request_line", "error"),
    [
        ({"id": 7, "op": "delete_everything"}, "unknown op 'delete_everything': read, write or append"),
        ({"id": 7, "op": "write", "content": 5}, "write needs 'content' as a string"),
        ({"id": 7, "op": "append"}, "append needs 'text' as a string"),
    ],
)
async def test_an_invalid_request_gets_an_error_reply_with_its_id(request_line: dict, error: str) -> None:
    code = RAW + f"send({json.dumps(request_line)!r}.encode() + b'\\n')\nprint(json.dumps(reply()))"
    notepad = FakeNotepad("kept")
    result = await run(code, notepad=notepad)
    assert json.loads(result.stdout) == {"id": 7, "ok": False, "error": error}
    assert notepad.content == "kept"


@pytest.mark.parametrize("raw_id", ['"1"', "1.5", "true", "null", str(2**60)])
async def test_a_request_without_a_valid_integer_id_is_refused(raw_id: str) -> None:
    code = RAW + f'send(b\'{{"id": {raw_id}, "op": "read"}}\\n\')\nprint(json.dumps(reply()))'
    result = await run(code, notepad=FakeNotepad())
    assert json.loads(result.stdout) == {
        "id": None,
        "ok": False,
        "error": "malformed request: id must be an integer",
    }


async def test_an_oversized_line_closes_the_bridge_and_the_run_goes_on(monkeypatch: Any) -> None:
    monkeypatch.setattr(bridge, "BRIDGE_MAX_LINE_BYTES", 4096)
    code = RAW + textwrap.dedent(
        """
        send(b'{"id": 1, "op": "write", "content": "' + b"x" * 100_000 + b'"}\\n')
        print(reply()["error"])
        try:
            session.notepad.append("after")
        except session.NotepadError as exc:
            print("then:", exc)
        """
    )
    notepad = FakeNotepad("kept")
    result = await run(code, notepad=notepad)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "request over 4096 bytes: bridge closed"
    assert result.stdout.splitlines()[1].startswith("then: the notepad bridge is closed")
    assert notepad.content == "kept"


async def test_requests_past_the_limit_close_the_bridge(monkeypatch: Any) -> None:
    monkeypatch.setattr(bridge, "BRIDGE_MAX_REQUESTS", 3)
    code = textwrap.dedent(
        """
        for i in range(5):
            try:
                session.notepad.append(str(i))
            except session.NotepadError as exc:
                print(i, exc)
        """
    )
    notepad = FakeNotepad()
    result = await run(code, notepad=notepad)
    assert notepad.content == "012"
    assert result.stdout.splitlines()[0] == "3 more than 3 requests: bridge closed"
    assert result.stdout.splitlines()[1].startswith("4 the notepad bridge is closed")


async def test_a_flood_of_unread_replies_neither_hangs_nor_grows_the_server() -> None:
    # 200,000 reads never answered by the code: the server's replies wait on the full pipe, the
    # code's requests then wait on the server; the run ends by its timeout, the server unharmed.
    code = RAW + 'for _ in range(200_000):\n    send(b\'{"id": 1, "op": "read"}\\n\')\nprint(\'sent\')'
    result = await run(code, notepad=FakeNotepad("n" * 10_000), timeout=3)
    assert result.timed_out and result.stdout == ""


async def test_a_notepad_failure_the_server_did_not_expect_is_a_generic_error() -> None:
    class Broken(FakeNotepad):
        async def read(self) -> str:
            raise RuntimeError("database path /secret/db.sqlite3 is locked")

    result = await run("session.notepad.read()", notepad=Broken())
    assert "NotepadError: the notepad call failed (server error)" in result.stderr
    assert "/secret" not in result.stderr


# -- the real notepad service -----------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_edits_through_the_real_notepad_are_the_agents_revisions_and_events() -> None:
    session = await sync_to_async(session_make)()
    code = "session.notepad.write('a')\nsession.notepad.append('b')\nprint(session.notepad.read())"
    result = await run(code, notepad=SessionNotepad(session_id=session.id))
    assert result.stdout == "ab\n"
    assert await sync_to_async(revisions)(session) == [
        (1, "agent", "write", "a"),
        (2, "agent", "append", "ab"),
    ]
    assert await sync_to_async(notepad_events)(session) == [
        {"content": "a", "version": 1, "author": "agent"},
        {"content": "ab", "version": 2, "author": "agent"},
    ]


@pytest.mark.django_db(transaction=True)
async def test_the_real_notepads_limit_is_a_notepad_error_inside(monkeypatch: Any) -> None:
    monkeypatch.setattr(memory_services, "NOTEPAD_MAX_CHARS", 3)
    session = await sync_to_async(session_make)()
    result = await run("session.notepad.write('abcd')", notepad=SessionNotepad(session_id=session.id))
    assert "NotepadError" in result.stderr and "over its limit of 3" in result.stderr
    assert await sync_to_async(revisions)(session) == []
