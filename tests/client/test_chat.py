"""The terminal chat against a real daphne: its core loop with scripted input, and the real
program under a pseudo-terminal."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from palimpsest_client import connect
from palimpsest_client.chat import Chat, main
from tests.servers import BASE_DIR, Daphne, free_port, manage

PTY_WAIT_SECONDS = 60
# The server re-checks tokens every 0.2 s in that test; the chat must not wait for a message.
REVOKED_TOLD_WITHIN_SECONDS = 15


async def scripted(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line + "\n"


async def test_one_exchange_then_notepad_and_scratchpad(daphne: Daphne, token: str):
    out = io.StringIO()
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False)
        await chat.start(None)
        await chat.run(
            scripted("echo hello from the terminal", "remember: the key is blue", "/notepad", "/scratchpad")
        )
        session_id = chat.session.id if chat.session else ""
    lines = out.getvalue().splitlines()
    assert lines[0] == f"New session {session_id} (model scripted)."
    assert "model> hello from the terminal" in lines
    notepad_at = lines.index("model> Noting that in my notepad.")
    assert lines[notepad_at + 1 : notepad_at + 4] == [
        '  · tool update_notepad {"operation": "append", "content": "the key is blue\\n"}'
        " (run by the server)",
        "  · notepad updated (version 1, by agent)",
        '  · update_notepad → {"ok": true}',
    ]
    # /notepad shows what the events said, without asking the model.
    assert lines[-2:] == ["the key is blue", "(the scratchpad is empty)"]


async def test_cancel_attach_and_a_sub_sessions_notices(server_env_sqlite, token, tmp_path):
    env = {**server_env_sqlite, "PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS": "0.1"}
    out = io.StringIO()

    async def shown(text: str, *, last: bool = False) -> None:
        """Wait until the chat has written `text` (`last`: as the last thing it wrote); a hung
        chat fails the test, not the suite."""
        for _ in range(int(PTY_WAIT_SECONDS / 0.05)):
            written = out.getvalue()
            if written.endswith(text) if last else text in written:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared; the chat wrote:\n{out.getvalue()}")

    async def typed() -> AsyncIterator[str]:
        yield "echo " + " ".join(f"w{n}" for n in range(100)) + "\n"
        await shown("model> w0")
        yield "/cancel\n"
        await shown("turn ended: cancelled")
        yield "spawn echo from below\n"
        await shown("model> spawn_session returned")
        await shown("you> ", last=True)  # the prompt after that turn

    with Daphne(env, tmp_path / "chat.log") as server:
        async with connect(server.ws_url, token) as client:
            first = Chat(client, out, interactive=True)
            await first.start(None)
            await first.run(typed())
            assert first.session is not None
            again = io.StringIO()
            other = Chat(client, again, interactive=False)
            await other.start(None)
            await other.run(scripted(f"/attach {first.session.id}", "/attach", "/nonsense"))
    text = out.getvalue()
    assert text.count("you> ") == 3  # at the start and after each turn, never twice in a row
    assert "  · turn ended: cancelled" in text
    assert "  · sub-session " in text and "started (spawn): " in text
    assert "] said: from below" in text  # the child's answer, as a notice
    attached = again.getvalue().splitlines()
    assert f"Attached to {first.session.id} (terminal chat, idle, " in attached[2]
    assert attached[3].startswith("you> echo w0 w1")
    assert attached[-2:] == ["Usage: /attach SESSION_ID", "Unknown command /nonsense; /help lists them."]


async def test_after_a_failed_attach_the_chat_stays_on_its_session(daphne: Daphne, token: str):
    out = io.StringIO()
    missing = str(uuid.uuid4())
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False)
        await chat.start(None)
        session = chat.session
        await chat.run(scripted("echo one", "/attach nonsense", f"/attach {missing}", "echo two", "/notepad"))
        assert chat.session is session and client.session is session
    lines = out.getvalue().splitlines()
    assert lines[2:] == [
        "model> one",
        "! session_not_found: no such session",
        "! session_not_found: no such session",
        "model> two",
        "(the notepad is empty)",
    ]


async def test_an_attach_whose_state_is_refused_leaves_the_chat_on_the_attached_session(
    server_env_sqlite, token, tmp_path
):
    # Two frames a second: `session.attach` is let through, the `session.get` right after it is not.
    env = {**server_env_sqlite, "PALIMPSEST_QUOTA_FRAMES_PER_SECOND": "2"}
    out = io.StringIO()

    async def typed(other: str) -> AsyncIterator[str]:
        yield f"/attach {other}\n"
        await asyncio.sleep(1.5)  # the quota refills
        yield "echo on the other one\n"

    with Daphne(env, tmp_path / "quota.log") as server:
        async with connect(server.ws_url, token) as client:
            other = await client.create_session(title="other")
            await asyncio.sleep(1.5)
            chat = Chat(client, out, interactive=False)
            await chat.start(None)
            await chat.run(typed(other.id))
            assert chat.session is client.session
            assert chat.session is not None and chat.session.id == other.id
    lines = out.getvalue().splitlines()
    assert lines[2:4] == [
        f"Attached to {other.id}, but its state could not be read:",
        "! rate_limited: too many frames: at most 2 a second per token (per server process); "
        "this one was ignored",
    ]
    assert lines[-1] == "model> on the other one"


def _read_until(fd: int, needle: str, seen: list[str]) -> str:
    """Read the pseudo-terminal until `needle` appears in what was read since the last call."""
    deadline = time.monotonic() + PTY_WAIT_SECONDS
    chunk = ""
    while needle not in chunk:
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} did not appear; the terminal showed:\n{''.join(seen)}{chunk}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 4096).decode("utf-8", "replace")
            except OSError:
                break
            chunk += data
    seen.append(chunk)
    return chunk


def test_the_program_in_a_terminal(daphne: Daphne, token: str, tmp_path: Path):
    controller, terminal = pty.openpty()
    env = {**os.environ, "PALIMPSEST_TOKEN": token}
    program = subprocess.Popen(
        [sys.executable, "-m", "palimpsest_client", "chat", "--url", daphne.ws_url],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        cwd=BASE_DIR,
        env=env,
        close_fds=True,
    )
    os.close(terminal)
    seen: list[str] = []
    try:
        assert "Type a message, or /help." in _read_until(controller, "you> ", seen)
        os.write(controller, b"remember: the key is blue\n")
        answer = _read_until(controller, "you> ", seen)
        assert "model> Noting that in my notepad." in answer
        assert "notepad updated (version 1, by agent)" in answer
        os.write(controller, b"/notepad\n")
        assert "the key is blue" in _read_until(controller, "you> ", seen)
        os.write(controller, b"/quit\n")
        assert program.wait(timeout=30) == 0
    finally:
        if program.poll() is None:
            program.kill()
            program.wait()
        os.close(controller)


def test_a_token_revoked_while_the_chat_waits_is_told_at_once(server_env_sqlite, token, tmp_path):
    env = {**server_env_sqlite, "PALIMPSEST_TOKEN_RECHECK_SECONDS": "0.2"}
    controller, terminal = pty.openpty()
    seen: list[str] = []
    with Daphne(env, tmp_path / "revoke.log") as server:
        program = subprocess.Popen(
            [sys.executable, "-m", "palimpsest_client", "chat", "--url", server.ws_url],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            cwd=BASE_DIR,
            env={**os.environ, "PALIMPSEST_TOKEN": token},
            close_fds=True,
        )
        os.close(terminal)
        try:
            _read_until(controller, "you> ", seen)
            os.write(controller, b"echo before\n")
            assert "model> before" in _read_until(controller, "you> ", seen)
            manage("revoke_agent_token", "client-tests", env=env)
            revoked_at = time.monotonic()
            # Nothing more is typed: the chat says so by itself, and ends.
            told = _read_until(controller, "`make chat` again", seen)
            assert time.monotonic() - revoked_at < REVOKED_TOLD_WITHIN_SECONDS
            assert program.wait(timeout=30) == 2
        finally:
            if program.poll() is None:
                program.kill()
                program.wait()
            os.close(controller)
    # On a line of its own, after the prompt that waited.
    assert told.startswith("\r\nThe server closed the connection: the token was revoked (close code 4401).")
    assert "delete .local/chat-token (or set PALIMPSEST_TOKEN to a valid token)" in told
    assert "Traceback" not in "".join(seen)


def test_a_refused_token_says_to_delete_the_saved_one(daphne: Daphne, capsys):
    assert main(["--url", daphne.ws_url, "--token", "pal_wrong"]) == 2
    told = capsys.readouterr().out
    assert told.startswith("The server refused the token (close code 4401)")
    assert "delete .local/chat-token (or set PALIMPSEST_TOKEN to a valid token)" in told


def test_without_a_token_the_chat_says_how_to_make_one(monkeypatch, capsys):
    monkeypatch.delenv("PALIMPSEST_TOKEN", raising=False)
    assert main(["--url", "ws://127.0.0.1:9/ws/agent/"]) == 2
    assert "create_agent_token NAME" in capsys.readouterr().err


def test_with_no_server_the_chat_says_so(capsys):
    url = f"ws://127.0.0.1:{free_port()}/ws/agent/"
    assert main(["--url", url, "--token", "pal_x"]) == 1
    assert f"Cannot connect to {url}" in capsys.readouterr().out


def _log_text(lines: int, tag: str) -> str:
    """About 2 KB a file: under the offload threshold, some 650 tokens."""
    return "".join(
        f"{tag} {i:04d} INFO worker started job {i * 7919 % 10007} in 12 ms\n" for i in range(lines)
    )


async def test_masked_tool_results_show_as_one_readable_line(server_env_sqlite, token, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    for n in range(3):
        (files / f"log{n}.txt").write_text(_log_text(40, f"R{n}"))
    env = {**server_env_sqlite, "PALIMPSEST_FS_ROOT": str(files)}
    # A window that holds about two of the results: the third read masks the older ones.
    settings = {
        "notepad": {"enabled": False},
        "scratchpad": {"enabled": False},
        "compaction": {"mask_keep_recent": 1},
    }
    out = io.StringIO()
    with Daphne(env, tmp_path / "masking.log") as server:
        async with connect(server.ws_url, token) as client:
            session = await client.create_session(title="masking", context_window=4000, settings=settings)
            chat = Chat(client, out, interactive=False)
            await chat.start(session.id)
            await chat.run(scripted(*(f'tool fs_read {{"path": "log{n}.txt"}}' for n in range(3))))
    masked = [line for line in out.getvalue().splitlines() if line.startswith("  · masked ")]
    assert masked, out.getvalue()
    observation = "[0-9a-f]{16}"
    # One line per masking, however many results it masked (one, or a batch).
    assert all(
        re.fullmatch(
            rf"  · masked (1 old tool result|\d+ old tool results): \d+ → \d+ tokens \(kept whole as "
            rf"observations? {observation}(, {observation})*\)",
            line,
        )
        for line in masked
    ), masked
    assert "tool_use_id" not in out.getvalue()


async def test_a_chat_of_an_agent_creates_it_when_missing_and_ends_its_session(daphne: Daphne, token: str):
    out = io.StringIO()
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False, agent="helper")
        await chat.start(None)
        await chat.run(scripted("learn: be brief", "/end", "echo after"))
        assert (await client.get_agent("helper"))["name"] == "helper"
        again = Chat(client, io.StringIO(), interactive=False, agent="helper")
        await again.start(None)  # the agent exists now: not created twice
    lines = out.getvalue().splitlines()
    assert lines[0] == "Created the agent helper."
    assert lines[1].startswith("New session ") and "of the agent helper" in lines[1]
    assert any(line.endswith("ended: it takes no more messages.") for line in lines)
    assert any("agent helper: learned updated (version 1)" in line for line in lines)
    assert any("session_ended" in line for line in lines)


async def test_a_line_ending_with_a_backslash_goes_on_with_the_message(daphne: Daphne, token: str):
    """One message of several lines (code for `define tool`, a list): each continued line's
    backslash is dropped, its indentation kept."""
    out = io.StringIO()
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False, agent="helper")
        await chat.start(None)
        await chat.run(
            scripted(
                "define tool add_up: def run(args, session):\\",
                "    total = 0\\",
                "    for part in (1, 2, 3):\\",
                "        total += part\\",
                "        session.notepad.append(f'part {part} done\\n')\\",
                "    return {'total': total}",
                "tool add_up {}",
            )
        )
    text = out.getvalue()
    assert 'model> define_tool returned: {"ok": true, "version": 1}\nDefined.' in text
    assert 'add_up → {"total": 6}' in text
    assert [line for line in text.splitlines() if "notepad updated" in line] == [
        f"  · notepad updated (version {n}, by agent): part {n} done" for n in (1, 2, 3)
    ]


async def test_budget_shows_spend_sets_a_limit_and_lifts_it(daphne: Daphne, token: str):
    """`/budget` (issue 36 item 8): the limits and the spend; a limit reached stops the next turn
    with `budget_reached`; `/budget off` lets the next message go on."""
    out = io.StringIO()
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False)
        await chat.start(None)
        await chat.run(
            scripted(
                "/budget",
                "echo spend something",
                "/budget input 1",
                "echo over the budget",
                "/budget cost x",
                "/budget off",
                "echo on again",
            )
        )
    lines = out.getvalue().splitlines()
    budgets = [line for line in lines if line.startswith("Budget:")]
    # The scripted model has no price: its spend is in tokens only.
    assert budgets[0] == "Budget: none. Spent: no price known, 0 input and 0 output tokens."
    assert budgets[1].startswith("Budget: input 1. Spent: no price known, ")
    assert "  · turn ended: budget_reached" in lines
    assert "model> over the budget" not in lines
    assert "Usage: /budget cost N (a number)" in lines
    assert budgets[2].startswith("Budget: none.")
    assert lines[-1] == "model> on again"


async def test_export_then_import_attaches_to_the_copy(daphne: Daphne, token: str, tmp_path: Path):
    """`/export FILE` and `/import FILE` (issue 36 item 8): the copy is a new session of this
    token, attached, that remembers what the original's notepad holds."""
    out = io.StringIO()
    target = tmp_path / "exported.json"
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False)
        await chat.start(None)
        original = chat.session.id if chat.session else ""
        await chat.run(
            scripted(
                "remember: the Q3 gap is in EMEA",
                "/export",
                f"/export {target}",
                f"/import {tmp_path / 'missing.json'}",
                f"/import {target}",
                "/notepad",
            )
        )
        copy = chat.session.id if chat.session else ""
    lines = out.getvalue().splitlines()
    assert "Usage: /export FILE" in lines
    assert any(line.startswith(f"Exported session {original} to {target} (") for line in lines)
    assert any(line.startswith(f"! cannot read {tmp_path / 'missing.json'}") for line in lines)
    assert f"Imported {target} as session {copy}." in lines and copy != original
    assert lines[-1] == "the Q3 gap is in EMEA"


async def test_a_tool_call_waiting_for_approval_is_answered_with_y_or_n(daphne: Daphne, token: str):
    """Against the server's approvals (docs/approvals.md): piped input answers a waiting call with
    the next line; `n REASON` refuses it with the reason, which the model reads."""
    out = io.StringIO()
    async with connect(daphne.ws_url, token) as client:
        chat = Chat(client, out, interactive=False)
        chat.session = await client.create_session(settings={"approvals": {"count_words": "always_ask"}})
        await chat.run(
            scripted(
                'tool count_words {"text": "a b c"}',
                "y",
                'tool count_words {"text": "d"}',
                "n not in this chat",
            )
        )
    lines = out.getvalue().splitlines()
    asks = [line for line in lines if "waits for your approval" in line]
    assert len(asks) == 2 and asks[0].startswith('  · tool count_words {"text": "a b c"} waits')
    assert any(line.startswith("Approved count_words (") for line in lines)
    assert any(line.startswith("Denied count_words (") for line in lines)
    assert any(line.startswith("  · count_words → ") for line in lines)
    assert any(line.startswith("  · count_words failed ") and "not in this chat" in line for line in lines)
