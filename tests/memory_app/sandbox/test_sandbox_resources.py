"""Resource attacks (fork, memory, output, disk bombs) and the jail's process tree: bounded, then gone."""

from __future__ import annotations

import asyncio
import glob
import os
import resource
import stat
import tempfile
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from memory_app.sandbox import bootstrap, limits
from memory_app.sandbox.runtime import tree_remove
from tests.memory_app.sandbox.support import (
    FakeNotepad,
    descendants,
    processes_with,
    run,
    sandbox_marker,
    until_gone,
)

# In the command line of every process of every jail (the bootstrap's source is passed with -c).
JAIL_MARK = str(bootstrap.__doc__).splitlines()[0]
# Children that sleep for long, each carrying `marker` in its command line so the host can find them.
SPAWN = textwrap.dedent(
    """
    import os, subprocess, sys, time
    MARKER = {marker!r}
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", MARKER]
    kids = [subprocess.Popen(sleeper) for _ in range(3)]
    if os.fork() == 0:  # a daemon: its own session, its parent gone
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
        os._exit(0)

    def marked():
        found = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                found += MARKER.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read()
            except OSError:
                pass
        return found

    while marked() < 4:  # all four started (exec'd) before telling the server
        time.sleep(0.01)
    """
)


# -- fork bomb ---------------------------------------------------------------------------------------
async def test_forking_stops_at_the_process_limit() -> None:
    code = textwrap.dedent(
        """
        import os, time
        forked = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
                forked += 1
        except OSError as exc:
            print(forked, exc.strerror)
        """
    )
    forked, reason = (await run(code)).stdout.split(" ", 1)
    # bubblewrap's init and the program itself count too
    assert (int(forked), reason) == (limits.SANDBOX_MAX_PROCESSES - 2, "Resource temporarily unavailable\n")


async def test_a_fork_bomb_is_bounded_and_the_server_stays_responsive() -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    pings = 0
    most = 0

    async def ping() -> None:
        nonlocal pings, most
        while True:
            await asyncio.sleep(0.05)
            pings += 1
            most = max(most, len(descendants(os.getpid())))

    pinger = asyncio.create_task(ping())
    try:
        result = await run(bomb, timeout=3)
    finally:
        pinger.cancel()
    assert result.timed_out and pings > 0
    # the jail's processes plus bubblewrap outside the pid namespace (and its launcher, exec'd into it)
    assert 0 < most <= limits.SANDBOX_MAX_PROCESSES + 1
    assert await until_gone(JAIL_MARK) == []


# -- memory, disk, output ---------------------------------------------------------------------------
async def test_a_memory_bomb_fails_with_memory_error() -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))"
    result = await run(code, memory_mb=128)
    assert result.exit_code == 1 and result.stderr.rstrip().endswith("MemoryError")


async def test_one_allocation_over_the_memory_size_fails() -> None:
    result = await run("x = bytearray(200 * 1024 * 1024)", memory_mb=128)
    assert result.exit_code == 1 and "MemoryError" in result.stderr


async def test_filling_the_temp_directory_stops_at_its_size() -> None:
    code = textwrap.dedent(
        """
        import os
        written = 0
        try:
            for i in range(10_000):
                with open(f"/tmp/fill{i}", "wb") as f:
                    f.write(b"x" * (1024 * 1024))
                written += 1
        except OSError as exc:
            print(written, exc.strerror)
        """
    )
    written, reason = (await run(code)).stdout.split(" ", 1)
    assert int(written) <= limits.SANDBOX_TMP_BYTES // (1024 * 1024) and reason == "No space left on device\n"


async def test_a_file_over_the_file_size_limit_cannot_be_written() -> None:
    code = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with open("/tmp/big", "wb") as f:
            try:
                f.write(b"x" * ({limits.SANDBOX_MAX_FILE_BYTES} + 1))
                f.flush()
            except OSError as exc:
                print(exc.strerror)
        """
    )
    assert (await run(code)).stdout == "File too large\n"


async def test_a_200_mb_output_is_truncated_and_the_server_memory_stays_bounded() -> None:
    code = "import sys\nchunk = 'x' * (1024 * 1024)\nfor _ in range(200):\n    sys.stdout.write(chunk)"
    peak_before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await run(code, timeout=60)
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before_kb) / 1024
    assert (result.exit_code, result.timed_out, result.output_truncated) == (0, False, True)
    assert len(result.stdout) == limits.SANDBOX_OUTPUT_MAX_BYTES
    assert growth_mb < 50


# -- the server's side of the process tree -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kill", "outcome"),
    [
        # bubblewrap's init is pid 1 inside: the kernel drops SIGKILL sent to it from its own namespace
        ("os.kill(os.getppid(), 9)", (0, "still here\n")),
        # every process the program may signal: in its jail there is none (init and itself excepted)
        ("os.kill(-1, 9)", (0, "ProcessLookupError\nstill here\n")),
        # its own process group (a session of its own: --new-session): it kills itself, no one else
        ("os.killpg(0, 9)", (128 + 9, "")),
    ],
)
async def test_killing_the_parent_or_everyone_reaches_only_the_jail(
    kill: str, outcome: tuple[int, str]
) -> None:
    code = f"import os\ntry:\n    {kill}\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
    code += "print('still here')"
    result = await run(code)
    assert (result.exit_code, result.stdout) == outcome and result.timed_out is False
    assert await until_gone(JAIL_MARK) == []  # the server itself carries on, and nothing is left


async def test_the_timeout_kills_every_process_of_the_jail() -> None:
    marker = sandbox_marker()
    notepad = FakeNotepad()
    code = SPAWN.format(marker=marker) + "session.notepad.append('spawned')\ntime.sleep(600)"
    task = asyncio.create_task(run(code, timeout=5, notepad=notepad))
    await notepad.seen("spawned")
    assert len(processes_with(marker)) == 4
    assert (await task).timed_out
    assert await until_gone(marker) == []


async def test_cancelling_the_run_kills_every_process_of_the_jail() -> None:
    marker = sandbox_marker()
    notepad = FakeNotepad()
    code = SPAWN.format(marker=marker) + "session.notepad.append('spawned')\ntime.sleep(600)"
    task = asyncio.create_task(run(code, notepad=notepad))
    await notepad.seen("spawned")
    assert len(processes_with(marker)) == 4
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await until_gone(marker) == []


async def test_processes_left_behind_by_a_finished_program_are_killed() -> None:
    marker = sandbox_marker()
    result = await run(SPAWN.format(marker=marker) + "print('leaving')")
    assert result.stdout == "leaving\n"
    assert await until_gone(marker) == []


# -- the host temp directory and symlinks -------------------------------------------------------------
async def test_symlinks_planted_by_the_program_leave_the_host_untouched() -> None:
    victims = ["/etc", str(settings.BASE_DIR), str(Path(settings.BASE_DIR) / "manage.py")]
    before = {v: os.stat(v) for v in victims}
    code = textwrap.dedent(
        f"""
        import os
        for i, target in enumerate({victims!r}):
            os.symlink(target, f"/tmp/link{{i}}")
            os.symlink(target, f"/dev/shm/link{{i}}")
        os.mkdir("/tmp/d")
        os.symlink("/", "/tmp/d/root")
        os.chmod("/tmp/d", 0)
        print(sorted(os.listdir("/tmp")))
        """
    )
    ours = set(glob.glob(os.path.join(tempfile.gettempdir(), "palimpsest-sandbox-*")))
    result = await run(code)
    assert result.stdout == "['d', 'link0', 'link1', 'link2']\n"
    assert {v: os.stat(v) for v in victims} == before
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "palimpsest-sandbox-*"))) <= ours


def test_cleanup_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    victim.chmod(0o750)
    doomed = tmp_path / "palimpsest-sandbox-x"
    (doomed / "sub").mkdir(parents=True)
    (doomed / "link").symlink_to(victim)
    (doomed / "sub" / "link").symlink_to(victim / "precious")
    (doomed / "sub").chmod(0)
    tree_remove(str(doomed))
    assert not doomed.exists()
    assert (victim / "precious").read_text() == "keep me"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o750


async def test_the_program_runs_at_a_lower_priority_it_cannot_undo() -> None:
    code = (
        "import os\nprint(os.nice(0))\ntry:\n    os.nice(-1)\nexcept PermissionError:\n    print('refused')"
    )
    assert (await run(code)).stdout == f"{limits.SANDBOX_NICE}\nrefused\n"
