"""`run_sandbox_code` through the fake Messages API: real code in the real jail, the notepad API
inside, the offload rule, timeouts and cancel, and the switches."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad.models import NotepadRevision
from sessions_app.models import AgentSession
from tests.fake_anthropic import text, tool_use
from tests.memory_app.notepad_support import notepad_last_section, turn

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"


def revision_rows(session_id: uuid.UUID) -> list[tuple[int, str]]:
    return list(NotepadRevision.objects.filter(session_id=session_id).values_list("version", "operation"))


def result_of(frames: list[dict]) -> dict:
    return json.loads(next(f for f in frames if f["type"] == "tool.result")["content"])


async def test_a_computations_stdout_reaches_the_model(connect, fake_anthropic):
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": "print(sum(range(10)) * 6)"}), text("270"))
    client = await connect()
    session = await client.create(model=MODEL)
    assert session["sandbox"] is True and "run_sandbox_code" in session["server_tools"]
    frames = await turn(client, "compute")
    result = result_of(frames)
    assert (result["exit_code"], result["stdout"], result["timed_out"]) == (0, "270\n", False)
    assert set(result) == {"exit_code", "stdout", "stderr", "timed_out", "duration_ms"}
    sent = fake_anthropic.requests[-1].body["messages"][-1]["content"][0]
    assert json.loads(sent["content"])["stdout"] == "270\n"


async def test_the_codes_edits_are_one_revision_and_one_event_and_the_next_request_shows_them(
    connect, fake_anthropic
):
    code = (
        "session.notepad.write('# Progress\\n')\n"
        "for step in range(3):\n"
        "    session.notepad.append(f'step {step} done\\n')\n"
        "print(session.notepad.read().count('done'))\n"
    )
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code}), text("noted"))
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "work")
    updates = [f for f in frames if f["type"] == "notepad.updated"]
    # Four edits, each stored at once (the code's read saw them): one event, the last version.
    assert [(u["version"], u["author"]) for u in updates] == [(4, "agent")]
    assert updates[0]["content"] == "# Progress\nstep 0 done\nstep 1 done\nstep 2 done\n"
    types = [f["type"] for f in frames]
    # Announced when the run ends, before the tool's result.
    assert types.index("notepad.updated") < types.index("tool.result")
    assert result_of(frames)["stdout"] == "3\n"
    rows = await sync_to_async(revision_rows)(uuid.UUID(session["id"]))
    assert rows == [(4, "write")]
    await turn(client, "next")
    assert notepad_last_section(fake_anthropic.requests[-1].body) == (
        "## Session Notepad\n# Progress\nstep 0 done\nstep 1 done\nstep 2 done\n"
    )


async def test_a_large_output_goes_through_the_offload_rule(connect, fake_anthropic):
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": "print('x' * 20000)"}), text("big"))
    client = await connect()
    await client.create(model=MODEL)
    frames = await turn(client, "print a lot")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert (
        result["observation_id"]
        and json.loads(result["content"])["scratchpad_id"] == result["observation_id"]
    )


async def test_a_timeout_kills_the_code_and_says_so(connect, fake_anthropic):
    code = "import time\nprint('started', flush=True)\ntime.sleep(120)"
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code, "timeout_seconds": 1}), text("slow"))
    client = await connect()
    await client.create(model=MODEL)
    result = result_of(await turn(client, "sleep"))
    assert result["timed_out"] is True and result["stdout"] == "started\n"


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


async def test_cancel_kills_the_whole_process_tree(connect, fake_anthropic):
    marker = f"marker-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n"
        "print('children started', flush=True)\n"
        "time.sleep(300)\n"
    )
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code, "timeout_seconds": 300}), text("x"))
    client = await connect()
    await client.create(model=MODEL, settings={"sandbox": {"timeout_seconds": 300}})
    await client.send({"type": "user.message", "content": "run forever"})
    await client.until("tool.call")
    for _ in range(100):  # the child shows up in /proc once the jail has started it
        if _processes_with(marker):
            break
        await __import__("asyncio").sleep(0.1)
    assert _processes_with(marker)
    await client.send({"type": "turn.cancel"})
    frames = await client.until("turn.completed", timeout=30)
    assert frames[-1]["stop_reason"] == "cancelled"
    assert _processes_with(marker) == []


async def test_bad_input_is_a_tool_error_and_nothing_runs(connect, fake_anthropic):
    fake_anthropic.enqueue(
        tool_use("run_sandbox_code", {"code": "print(1)", "timeout_seconds": 10_000}),
        tool_use("run_sandbox_code", {"code": ""}),
        text("ok"),
    )
    client = await connect()
    await client.create(model=MODEL)
    frames = await turn(client, "bad")
    errors = [f for f in frames if f["type"] == "tool.result"]
    assert [e["is_error"] for e in errors] == [True, True]
    assert "timeout_seconds must be an integer from 1 to 30" in errors[0]["content"]
    assert 'needs "code"' in errors[1]["content"]


async def test_the_session_setting_and_the_server_switch_remove_the_tool(connect, fake_anthropic, settings):
    client = await connect()
    session = await client.create(model=MODEL, settings={"sandbox": {"enabled": False}})
    assert session["sandbox"] is False
    await turn(client, "hi")
    assert "run_sandbox_code" not in {t["name"] for t in fake_anthropic.requests[-1].body["tools"]}
    settings.PALIMPSEST_SANDBOX = "off"
    other = await client.create(model=MODEL)
    assert other["sandbox"] is False and "run_sandbox_code" not in other["server_tools"]


async def test_without_a_notepad_the_code_is_told_so(connect, fake_anthropic):
    code = (
        "print(bool(session.notepad))\n"
        "try:\n    session.notepad.read()\nexcept Exception as exc:\n    print(type(exc).__name__)"
    )
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code}), text("ok"))
    client = await connect()
    await client.create(model=MODEL, settings={"notepad": {"enabled": False}})
    result = result_of(await turn(client, "try"))
    assert result["exit_code"] == 0 and result["stdout"] == "False\nNotepadError\n"


async def test_the_scripted_model_runs_code(connect):
    client = await connect()
    await client.create()
    frames = await turn(client, "run: session.notepad.append('progress: 50%\\n'); print(6 * 7)")
    assert result_of(frames)["stdout"] == "42\n"
    notepad = await sync_to_async(lambda: AgentSession.objects.get().notepad)()
    assert notepad == "progress: 50%\n"


async def test_the_dashboard_shows_a_sandbox_call_as_code_with_its_exit_and_output(
    connect, fake_anthropic, client, django_user_model
):
    code = "print('<b>not bold</b>')\nraise SystemExit(3)"
    fake_anthropic.enqueue(tool_use("run_sandbox_code", {"code": code}), text("done"))
    agent = await connect()
    session = await agent.create(model=MODEL)
    await turn(agent, "run it")
    operator = await sync_to_async(django_user_model.objects.create_user)("op", password="pw", is_staff=True)
    await sync_to_async(client.force_login)(operator)
    page = (await sync_to_async(client.get)(f"/sessions/{session['id']}/")).content.decode()
    assert '<pre class="code"><code>print(&#x27;&lt;b&gt;not bold&lt;/b&gt;&#x27;)' in page
    assert "exit 3" in page and "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page
