"""sandbox_run: what a program gets back (stdout, stderr, exit code, timeout) and the per-run rules."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import pytest

from memory_app.sandbox import limits
from memory_app.sandbox.errors import SandboxError
from tests.memory_app.sandbox.support import FakeNotepad, run


# -- results ---------------------------------------------------------------------------------------
async def test_a_computations_stdout_is_returned() -> None:
    result = await run("print(sum(i * i for i in range(10)))")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "285\n", "")


async def test_a_raising_program_exits_1_with_its_traceback_on_stderr() -> None:
    result = await run("x = 1\nraise ValueError('bad input')\n")
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert "line 2" in result.stderr and "raise ValueError('bad input')" in result.stderr
    assert result.stderr.endswith("ValueError: bad input\n")


async def test_the_traceback_shows_no_frame_of_the_bootstrap() -> None:
    result = await run("1 / 0")
    assert "bootstrap" not in result.stderr and 'File "<sandbox>", line 1' in result.stderr


async def test_sys_exit_sets_the_exit_code() -> None:
    result = await run("import sys\nprint('bye')\nsys.exit(3)")
    assert (result.exit_code, result.stdout) == (3, "bye\n")


async def test_exit_builtin_works_as_in_a_script() -> None:
    assert (await run("exit(4)")).exit_code == 4


async def test_a_syntax_error_is_reported_like_python() -> None:
    result = await run("def broken(:\n    pass")
    assert result.exit_code == 1 and "SyntaxError" in result.stderr and "<sandbox>" in result.stderr


async def test_stdin_is_empty() -> None:
    assert (await run("import sys\nprint(repr(sys.stdin.read()))")).stdout == "''\n"


async def test_the_working_directory_is_a_writable_private_tmp() -> None:
    code = (
        "import os\nopen('notes.txt', 'w').write('kept')\nprint(os.getcwd(), open('/tmp/notes.txt').read())"
    )
    assert (await run(code)).stdout == "/tmp kept\n"


async def test_tmp_starts_empty_on_every_run() -> None:
    await run("open('/tmp/left-behind', 'w').write('x')")
    assert (await run("import os\nprint(os.listdir('/tmp'))")).stdout == "[]\n"


async def test_the_standard_library_is_available() -> None:
    code = "import sqlite3, ssl, json, decimal, ctypes, zlib, hashlib, multiprocessing\nprint('ok')"
    assert (await run(code)).stdout == "ok\n"


async def test_installed_packages_are_not_importable() -> None:
    result = await run("import django")
    assert result.exit_code == 1 and "ModuleNotFoundError: No module named 'django'" in result.stderr


async def test_a_sleeping_programs_duration_covers_its_sleep() -> None:
    assert (await run("import time\ntime.sleep(0.3)")).duration_ms >= 300


# -- wall clock ------------------------------------------------------------------------------------
async def test_an_endless_loop_times_out_and_is_killed() -> None:
    result = await run("while True:\n    pass", timeout=2)
    assert (result.timed_out, result.exit_code) == (True, limits.SANDBOX_KILLED_EXIT_CODE)


async def test_output_written_before_a_timeout_is_kept() -> None:
    result = await run("print('started')\nwhile True:\n    pass", timeout=2)
    assert result.timed_out and result.stdout == "started\n"


async def test_a_program_that_ends_in_time_has_not_timed_out() -> None:
    assert (await run("pass", timeout=5)).timed_out is False


# -- output cap ------------------------------------------------------------------------------------
async def test_output_over_the_cap_is_truncated_to_the_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(limits, "SANDBOX_OUTPUT_MAX_BYTES", 1000)
    result = await run("import sys\nsys.stdout.write('a' * 5000)\nsys.stderr.write('b' * 10)")
    assert (result.stdout, result.stderr, result.output_truncated) == ("a" * 1000, "b" * 10, True)


async def test_output_within_the_cap_is_not_marked_truncated() -> None:
    assert (await run("print('x' * 1000)")).output_truncated is False


# -- input rules -----------------------------------------------------------------------------------
async def test_code_over_the_size_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="code is over"):
        await run("#" * (limits.SANDBOX_MAX_CODE_BYTES + 1))


@pytest.mark.parametrize("timeout", [0, limits.SANDBOX_MAX_TIMEOUT_SECONDS + 1])
async def test_a_timeout_out_of_bounds_is_refused(timeout: int) -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        await run("pass", timeout=timeout)


@pytest.mark.parametrize("memory_mb", [limits.SANDBOX_MIN_MEMORY_MB - 1, limits.SANDBOX_MAX_MEMORY_MB + 1])
async def test_a_memory_size_out_of_bounds_is_refused(memory_mb: int) -> None:
    with pytest.raises(ValueError, match="memory_mb"):
        await run("pass", memory_mb=memory_mb)


async def test_code_that_is_not_valid_unicode_is_refused() -> None:
    with pytest.raises(ValueError, match="Unicode"):
        await run("print('\udcff')")


# -- concurrency -----------------------------------------------------------------------------------
async def test_runs_over_the_server_wide_cap_wait_for_a_free_place(monkeypatch: Any) -> None:
    monkeypatch.setattr(limits, "SANDBOX_MAX_CONCURRENT", 1)
    notepad = FakeNotepad()
    code = textwrap.dedent(
        """
        import time
        session.notepad.append("start ")
        time.sleep(0.5)
        session.notepad.append("end ")
        """
    )
    await asyncio.gather(run(code, notepad=notepad), run(code, notepad=notepad))
    assert notepad.content == "start end start end "


# -- the jail's own failure ----------------------------------------------------------------------------
async def test_a_jail_that_fails_before_the_code_runs_is_a_sandbox_error(monkeypatch: Any) -> None:
    # A limit the bootstrap cannot apply (above the hard maximum): the code must not run without it.
    monkeypatch.setattr(limits, "SANDBOX_MAX_OPEN_FILES", 2**40)
    with pytest.raises(SandboxError, match="the jail failed to start"):
        await run("print('ran without its limits')")
