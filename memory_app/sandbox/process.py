"""Host-side plumbing of one run: its pipes, its output (capped), its stdin, killing its tree."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from memory_app.sandbox import limits

READY_BYTE = b"R"  # bootstrap.py writes the same


class Pipes:
    """The pipes of a run (the bootstrap's "ready"; with a notepad, bridge requests and replies), as
    a context manager that closes whatever the run did not hand over (`take`)."""

    def __init__(self, *, with_bridge: bool, with_result: bool = False) -> None:
        names = ("request", "reply", "ready") if with_bridge else ("ready",)
        self._names = (*names, "result") if with_result else names
        self._open: dict[str, int] = {}

    def __enter__(self) -> Pipes:
        for name in self._names:
            read_end, write_end = os.pipe()
            # The jail writes requests, "ready" and a call's result, and reads replies.
            child, server = (read_end, write_end) if name == "reply" else (write_end, read_end)
            self._open[f"{name}_child"], self._open[f"{name}_server"] = child, server
        return self

    def __exit__(self, *exc: object) -> None:
        for name in list(self._open):
            self._close(name)

    @property
    def request_child(self) -> int | None:
        return self._open.get("request_child")

    @property
    def reply_child(self) -> int | None:
        return self._open.get("reply_child")

    @property
    def result_child(self) -> int | None:
        return self._open.get("result_child")

    @property
    def ready_child(self) -> int:
        return self._open["ready_child"]

    @property
    def ready_server(self) -> int:
        return self._open["ready_server"]

    def child_ends(self) -> tuple[int, ...]:
        return tuple(self._open[f"{name}_child"] for name in self._names)

    def close_child_ends(self) -> None:
        """After the spawn: the server must not hold the jail's ends, or it would never see EOF."""
        for name in self._names:
            self._close(f"{name}_child")

    def take(self, name: str) -> int:
        """Hand an fd over to its new owner (who closes it)."""
        return self._open.pop(name)

    def _close(self, name: str) -> None:
        fd = self._open.pop(name, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class Captured:
    """One output stream: the first `max_bytes` (SANDBOX_OUTPUT_MAX_BYTES) kept, the rest read and
    dropped, so the program never blocks on a full pipe and the server's memory stays bounded."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.kept = bytearray()
        self.truncated = False
        self.max_bytes = max_bytes

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(limits.SANDBOX_OUTPUT_CHUNK_BYTES):
            most = limits.SANDBOX_OUTPUT_MAX_BYTES if self.max_bytes is None else self.max_bytes
            room = most - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            if len(chunk) > room:
                self.truncated = True

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


async def feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the program to the bootstrap's stdin and close it (a program that exits early is fine)."""
    try:
        stdin.write(data)
        await stdin.drain()
    except (ConnectionError, BrokenPipeError):
        pass
    finally:
        stdin.close()


def kill_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL bubblewrap and its process group. The jail's processes go with it: bubblewrap's init
    dies of --die-with-parent, and with a pid namespace's init the kernel kills every process in it."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def jail_started(ready_fd: int) -> bool:
    """Whether the bootstrap got as far as running the code: it writes READY_BYTE to its "ready" pipe
    once the limits hold, and closes it (so the code cannot write it), just before the code starts."""
    os.set_blocking(ready_fd, False)
    try:
        return os.read(ready_fd, 1) == READY_BYTE
    except OSError:
        return False
