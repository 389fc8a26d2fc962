"""Escape attempts: files, secrets, network, privileges. Each must fail inside the jail."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from memory_app.sandbox import limits
from memory_app.sandbox.runtime import runtime_view
from tests.memory_app.sandbox.escapes import ESCAPES, Escape
from tests.memory_app.sandbox.support import FakeNotepad, descendants, real_uid, run

PROJECT = Path(settings.BASE_DIR)
STDLIB = os.path.dirname(os.__file__)


def visible(paths: list[str]) -> str:
    """Code printing, as JSON, which of `paths` exist inside the jail."""
    return f"import json, os\nprint(json.dumps([p for p in {paths!r} if os.path.lexists(p)]))"


# -- the attempts that need nothing on the host (escapes.py: authored tools run them too) -------------
@pytest.mark.parametrize("escape", ESCAPES, ids=[e.id for e in ESCAPES])
async def test_an_escape_attempt_fails(escape: Escape) -> None:
    result = await run(escape.code)
    assert escape.held(result.stdout), result
    assert not escape.host_absent or not os.path.exists(escape.host_absent)


# -- the server's files ------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_the_database_files_are_not_visible() -> None:
    test_db = str(settings.DATABASES["default"]["NAME"])
    assert os.path.exists(test_db)  # the test database, in use right now
    paths = [test_db, str(PROJECT / "db.sqlite3"), test_db + "-wal"]
    assert json.loads((await run(visible(paths))).stdout) == []


@pytest.mark.parametrize("relative", ["manage.py", "config/settings.py", "memory_app", ".local", ".git"])
async def test_the_projects_files_are_not_visible(relative: str) -> None:
    path = PROJECT / relative
    assert path.exists()
    assert json.loads((await run(visible([str(path), str(PROJECT)]))).stdout) == []


async def test_the_servers_virtualenv_is_not_visible() -> None:
    paths = [
        sys.prefix,
        os.path.join(sys.prefix, "pyvenv.cfg"),
        os.path.dirname(os.path.dirname(pytest.__file__)),
    ]
    assert json.loads((await run(visible(paths))).stdout) == []


async def test_the_servers_home_shows_nothing_but_the_path_to_the_runtime() -> None:
    home = os.path.expanduser("~")
    runtime = {b.dest for b in runtime_view().binds}
    on_the_way = {
        p for p in os.listdir(home) if any(r.startswith(os.path.join(home, p) + "/") for r in runtime)
    }
    others = [os.path.join(home, p) for p in os.listdir(home) if p not in on_the_way]
    assert others and json.loads((await run(visible(others))).stdout) == []


async def test_the_base_installations_site_packages_are_empty() -> None:
    sites = list(runtime_view().masks)
    assert sites and all(os.listdir(s) for s in sites)  # full on the host
    code = f"import os\nprint([os.listdir(s) for s in {sites!r}])"
    assert (await run(code)).stdout == f"{[[] for _ in sites]}\n"


# -- secrets in the environment ------------------------------------------------------------------------
async def test_the_servers_environment_secret_is_not_visible(monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret-0123456789")
    code = textwrap.dedent(
        """
        import os
        print(dict(os.environ))
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
        """
    )
    result = await run(code)
    assert result.exit_code == 0 and "sk-ant-test-secret" not in result.stdout + result.stderr


# -- other processes -------------------------------------------------------------------------------
async def test_the_server_cannot_be_signalled() -> None:
    code = f"import os\ntry:\n    os.kill({os.getpid()}, 9)\n"
    code += "except ProcessLookupError:\n    print('no such process')"
    assert (await run(code)).stdout == "no such process\n"


# -- network ---------------------------------------------------------------------------------------
async def test_a_server_port_on_loopback_is_unreachable() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=10)\n"
        code += "except OSError as exc:\n    print(type(exc).__name__)"
        assert (await run(code)).stdout == "ConnectionRefusedError\n"
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever arrived


async def test_the_servers_abstract_unix_socket_is_unreachable() -> None:
    name = f"\0palimpsest-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(name)
        listener.listen()
        code = f"import socket\ntry:\n    socket.socket(socket.AF_UNIX).connect({name!r})\n"
        code += "except OSError as exc:\n    print(type(exc).__name__)"
        assert (await run(code)).stdout == "ConnectionRefusedError\n"


# -- privileges --------------------------------------------------------------------------------------
async def test_the_jails_processes_are_not_root_on_the_host() -> None:
    notepad = FakeNotepad()
    task = asyncio.create_task(
        run("import time\nsession.notepad.append('ready')\ntime.sleep(600)", notepad=notepad)
    )
    await notepad.seen("ready")
    try:
        uids = {real_uid(pid) for pid in descendants(os.getpid())}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert uids and 0 not in uids
    if os.geteuid() == 0:
        assert uids == {limits.SANDBOX_UID}
