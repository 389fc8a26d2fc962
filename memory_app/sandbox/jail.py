"""Running untrusted Python in a bubblewrap jail: `sandbox_available()` and `sandbox_run()`.

docs/sandbox.md is the threat model; command.py and runtime.py say what the jail is made of.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memory_app.sandbox import bridge, limits
from memory_app.sandbox.command import HOST_ENV, JailConfig, jail_command
from memory_app.sandbox.errors import SandboxError, SandboxUnavailable
from memory_app.sandbox.process import Captured, Pipes, feed, jail_started, kill_tree
from memory_app.sandbox.runtime import runtime_view, stage_create, tree_remove

SANDBOX_MODES = ("auto", "bwrap", "off")
TRIAL_CODE = "print(6 * 7)"
TRIAL_OUTPUT = "42"


@dataclass(frozen=True)
class SandboxResult:
    """One run's outcome (the `run_sandbox_code` result, plus `output_truncated`).

    `exit_code`: the program's exit status: 1 for an uncaught exception, 128+N when signal N ended it
    (e.g. 152 for RLIMIT_CPU's SIGXCPU), -9 when the server killed it for its wall clock (`timed_out`).
    `stdout`/`stderr`: decoded as UTF-8 (bad bytes replaced), at most SANDBOX_OUTPUT_MAX_BYTES each;
    `output_truncated` says either was cut. `duration_ms`: from the start to the end of the process.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int
    output_truncated: bool
    # A call of an authored tool (`sandbox_run(call_args=...)`): the outcome the bootstrap sent
    # back on its result pipe (bootstrap.py: `{"ok": true, "value"}` or `{"ok": false, "kind",
    # "error"}`), None when nothing readable came (the program was killed, or wrote the pipe
    # itself). Always None for a plain run.
    call_outcome: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Probe:
    ok: bool
    reason: str


# -- availability --------------------------------------------------------------------------------
def sandbox_mode() -> str:
    mode = str(getattr(settings, "PALIMPSEST_SANDBOX", "auto")).strip().lower()
    if mode not in SANDBOX_MODES:
        raise ImproperlyConfigured(
            f"PALIMPSEST_SANDBOX must be one of {', '.join(SANDBOX_MODES)}; got {mode!r}"
        )
    return mode


def sandbox_available() -> bool:
    """Whether `run_sandbox_code` may run here, per PALIMPSEST_SANDBOX.

    `off`: never. `auto`: when `bwrap` is on PATH and a trial run of the real jail prints what it
    should (it fails under some container seccomp profiles). `bwrap`: the same, but a missing or failing
    bubblewrap raises ImproperlyConfigured instead of answering False. The trial runs once per process
    and bwrap path (it blocks for a fraction of a second: call this at start-up or in a thread).
    """
    mode = sandbox_mode()
    if mode == "off":
        return False
    bwrap = _bwrap_on(os.environ.get("PATH", os.defpath))
    probe = _Probe(False, "bubblewrap (`bwrap`) is not installed") if bwrap is None else _trial(bwrap)
    if mode == "bwrap" and not probe.ok:
        raise ImproperlyConfigured(f"PALIMPSEST_SANDBOX=bwrap, but the sandbox cannot run: {probe.reason}")
    return probe.ok


@functools.lru_cache(maxsize=16)
def _bwrap_on(path: str) -> str | None:
    """Where `bwrap` is on `path`, looked for once per PATH (as the trial runs once per bwrap
    path): the engine asks at every request whether to offer the sandbox's tool, and a search
    of PATH is a dozen `stat`s."""
    return shutil.which("bwrap", path=path)


_trial_lock = threading.Lock()


@functools.cache
def _trial_cached(bwrap: str) -> _Probe:
    try:
        with _Stage() as stage:
            config = JailConfig(
                timeout_seconds=limits.SANDBOX_TRIAL_TIMEOUT_SECONDS,
                memory_mb=limits.SANDBOX_DEFAULT_MEMORY_MB,
                stage=stage,
            )
            argv = jail_command(bwrap=bwrap, view=runtime_view(), config=config)
            done = subprocess.run(
                argv,
                input=TRIAL_CODE.encode(),
                capture_output=True,
                timeout=limits.SANDBOX_TRIAL_TIMEOUT_SECONDS,
                env=HOST_ENV,
                cwd="/",
                start_new_session=True,
                check=False,
            )
    except (OSError, SandboxError, subprocess.SubprocessError) as exc:
        return _Probe(False, f"the trial run failed: {exc}")
    if done.returncode != 0 or done.stdout.decode(errors="replace").strip() != TRIAL_OUTPUT:
        detail = done.stderr.decode(errors="replace").strip()[-500:]
        return _Probe(False, f"the trial run failed (exit {done.returncode}): {detail}")
    return _Probe(True, "")


def _trial(bwrap: str) -> _Probe:
    with _trial_lock:
        return _trial_cached(bwrap)


class _Stage:
    """A private host tempdir with the launcher's mount points (only when root needs them); removed
    on exit without following any symlink (runtime.tree_remove)."""

    def __enter__(self) -> dict[str, str]:
        self.path = tempfile.mkdtemp(prefix="palimpsest-sandbox-")
        if os.geteuid() != 0:
            return {}
        return stage_create(view=runtime_view(), stage_dir=self.path)

    def __exit__(self, *exc: object) -> None:
        tree_remove(self.path)


# -- running -----------------------------------------------------------------------------------
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _gate() -> asyncio.Semaphore:
    """The server-wide cap on runs at once (one event loop per server process)."""
    loop = asyncio.get_running_loop()
    if loop not in _gates:
        _gates[loop] = asyncio.Semaphore(limits.SANDBOX_MAX_CONCURRENT)
    return _gates[loop]


def _check_input(code: str, timeout_seconds: int, memory_mb: int) -> bytes:
    if not isinstance(code, str):
        raise TypeError("code must be a string")
    low, high = limits.SANDBOX_MIN_TIMEOUT_SECONDS, limits.SANDBOX_MAX_TIMEOUT_SECONDS
    if type(timeout_seconds) is not int or not low <= timeout_seconds <= high:
        raise ValueError(f"timeout_seconds must be an integer from {low} to {high}")
    low, high = limits.SANDBOX_MIN_MEMORY_MB, limits.SANDBOX_MAX_MEMORY_MB
    if type(memory_mb) is not int or not low <= memory_mb <= high:
        raise ValueError(f"memory_mb must be an integer from {low} to {high}")
    try:
        data = code.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("code must be valid Unicode text") from None
    if len(data) > limits.SANDBOX_MAX_CODE_BYTES:
        raise ValueError(
            f"code is over {limits.SANDBOX_MAX_CODE_BYTES:,} bytes of UTF-8 (SANDBOX_MAX_CODE_BYTES)"
        )
    return data


async def sandbox_run(
    *,
    code: str,
    timeout_seconds: int,
    memory_mb: int,
    notepad: bridge.SandboxNotepad | None,
    call_args: dict[str, Any] | None = None,
) -> SandboxResult:
    """Run `code` (Python 3) in the jail and return what it did. With `call_args` (an authored
    tool's call), `run(call_args, session)` is called after the code ran, and what it returned
    comes back as the result's `call_outcome`.

    Rules: at most SANDBOX_MAX_CONCURRENT runs at once (later calls wait; waiting is not part of
    the timeout); the wall clock is `timeout_seconds` from start, then the whole process tree is
    killed (`timed_out`); cancelling the awaiting task kills it too. `notepad` (None: the session has
    none) serves `session.notepad` inside. Raises ValueError for bad input, SandboxUnavailable where
    the sandbox is off or cannot run, SandboxError if the jail itself failed to start.
    """
    data = _check_input(code, timeout_seconds, memory_mb)
    if call_args is not None:
        data = json.dumps({"code": code, "args": call_args}, ensure_ascii=False).encode()
    if not await asyncio.to_thread(sandbox_available):
        raise SandboxUnavailable("the code sandbox is not available on this server")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (`bwrap`) is not installed")
    async with _gate():
        return await _run(bwrap, data, timeout_seconds, memory_mb, notepad, call=call_args is not None)


async def _run(
    bwrap: str,
    data: bytes,
    timeout_seconds: int,
    memory_mb: int,
    notepad: bridge.SandboxNotepad | None,
    *,
    call: bool,
) -> SandboxResult:
    view = await asyncio.to_thread(runtime_view)
    with _Stage() as stage, Pipes(with_bridge=notepad is not None, with_result=call) as fds:
        config = JailConfig(
            timeout_seconds=timeout_seconds,
            memory_mb=memory_mb,
            request_fd=fds.request_child,
            reply_fd=fds.reply_child,
            max_line_bytes=bridge.BRIDGE_MAX_LINE_BYTES,
            ready_fd=fds.ready_child,
            stage=stage,
            result_fd=fds.result_child,
        )
        # Wrapped before the spawn: from the spawn to _supervise nothing awaits, so nothing can
        # interrupt the run before the code that always kills it is in charge.
        pipes = None
        if notepad is not None:
            pipes = await bridge.bridge_open(
                request_fd=fds.take("request_server"), reply_fd=fds.take("reply_server")
            )
        outcome = await _outcome_open(fds.take("result_server")) if call else None
        try:
            proc = await asyncio.create_subprocess_exec(
                *jail_command(bwrap=bwrap, view=view, config=config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=fds.child_ends(),
                env=HOST_ENV,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            if pipes is not None:
                pipes.close()
            if outcome is not None:
                outcome[1].close()
            raise SandboxError(f"the jail could not be started: {exc}") from exc
        started = time.monotonic()
        fds.close_child_ends()
        return await _supervise(
            proc, pipes, notepad, data, timeout_seconds, started, fds.ready_server, outcome
        )


async def _outcome_open(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """The server's end of a call's result pipe, as a stream (it owns the fd from now on)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    return reader, transport


def _outcome_parse(captured: Captured | None) -> dict[str, Any] | None:
    """What the bootstrap sent on the result pipe, or None when it is not one outcome object."""
    if captured is None or captured.truncated or not captured.kept:
        return None
    try:
        outcome = json.loads(bytes(captured.kept))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(outcome, dict) or not isinstance(outcome.get("ok"), bool):
        return None
    if outcome["ok"] and "value" not in outcome:
        return None
    return outcome


async def _supervise(
    proc: asyncio.subprocess.Process,
    pipes: bridge.BridgePipes | None,
    notepad: bridge.SandboxNotepad | None,
    data: bytes,
    timeout_seconds: int,
    started: float,
    ready_fd: int,
    outcome: tuple[asyncio.StreamReader, asyncio.ReadTransport] | None = None,
) -> SandboxResult:
    """Feed the code, serve the bridge, keep the output, enforce the wall clock, always kill.

    However this ends (normal exit, timeout, cancellation of the caller, an error), the tree is
    killed and the process reaped and its pipes drained before returning or raising (within
    SANDBOX_DRAIN_SECONDS), so nothing of the run outlives the call.
    """
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdout, stderr = Captured(), Captured()
    readers = [asyncio.create_task(stdout.drain(proc.stdout)), asyncio.create_task(stderr.drain(proc.stderr))]
    returned: Captured | None = None
    if outcome is not None:
        returned = Captured(limits.SANDBOX_CALL_RESULT_MAX_BYTES + limits.SANDBOX_CALL_ENVELOPE_BYTES)
        readers.append(asyncio.create_task(returned.drain(outcome[0])))
    feeder = asyncio.create_task(feed(proc.stdin, data))
    # Without a notepad the jail has no bridge pipes at all (session.notepad is off inside).
    served = asyncio.create_task(_serve(notepad, pipes))
    timed_out = False
    ended = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout_seconds)
            ended = True
        except TimeoutError:
            timed_out = True
        duration_ms = int((time.monotonic() - started) * 1000)
    finally:
        if not ended:  # timed out, cancelled or failed: requests still queued are not applied
            kill_tree(proc)
            served.cancel()
        reaped = asyncio.ensure_future(proc.wait())
        try:
            # The pipes end when the last process of the jail is gone (its pid namespace dies with bwrap).
            await asyncio.wait([reaped, *readers, served], timeout=limits.SANDBOX_DRAIN_SECONDS)
        finally:
            kill_tree(proc)
            for task in (reaped, *readers, feeder, served):
                task.cancel()
            if pipes is not None:
                pipes.close()
            if outcome is not None:
                outcome[1].close()
    if not timed_out and not jail_started(ready_fd):
        raise SandboxError(f"the jail failed to start: {stderr.text()[-1000:]}")
    return SandboxResult(
        exit_code=limits.SANDBOX_KILLED_EXIT_CODE if timed_out else _exit_code(proc),
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        duration_ms=duration_ms,
        output_truncated=stdout.truncated or stderr.truncated,
        call_outcome=None if timed_out else _outcome_parse(returned),
    )


async def _serve(notepad: bridge.SandboxNotepad | None, pipes: bridge.BridgePipes | None) -> int:
    if pipes is None:
        return 0
    return await bridge.bridge_serve(notepad=notepad, pipes=pipes)


def _exit_code(proc: asyncio.subprocess.Process) -> int:
    assert proc.returncode is not None
    return proc.returncode
