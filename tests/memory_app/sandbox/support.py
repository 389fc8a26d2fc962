"""Helpers for the sandbox tests: a fake notepad, a guarded run, and a look at the host's processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from memory_app.sandbox.jail import SandboxResult, sandbox_run
from sessions_app.engine.contract import ToolError

# Only hang guards: no assertion depends on how fast anything is.
HANG_GUARD_SECONDS = 120
TIMEOUT_SECONDS = 30
MEMORY_MB = 256


class FakeNotepad:
    """An in-memory notepad with the async API of memory_app.notepad.SessionNotepad.

    `max_chars` makes edits past it raise ToolError, as the real one does; `seen(text)` waits until
    the notepad's content contains `text`.
    """

    def __init__(self, content: str = "", *, max_chars: int | None = None) -> None:
        self.content = content
        self.max_chars = max_chars
        self.calls: list[tuple[str, str | None]] = []
        self._changed = asyncio.Event()

    async def read(self) -> str:
        self.calls.append(("read", None))
        return self.content

    async def write(self, content: str) -> None:
        self.calls.append(("write", content))
        self._set(content)

    async def append(self, text: str) -> None:
        self.calls.append(("append", text))
        self._set(self.content + text)

    def _set(self, content: str) -> None:
        if self.max_chars is not None and len(content) > self.max_chars:
            raise ToolError(
                f"The notepad would be {len(content)} characters, over its limit of {self.max_chars}."
            )
        self.content = content
        self._changed.set()

    async def seen(self, text: str) -> None:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while text not in self.content:
                self._changed.clear()
                await self._changed.wait()


async def run(
    code: str,
    *,
    timeout: int = TIMEOUT_SECONDS,
    memory_mb: int = MEMORY_MB,
    notepad: FakeNotepad | object | None = None,
) -> SandboxResult:
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        return await sandbox_run(
            code=code,
            timeout_seconds=timeout,
            memory_mb=memory_mb,
            notepad=notepad,  # type: ignore[arg-type]
        )


# -- the host's view of processes (/proc, no psutil) ---------------------------------------------
def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every living process under `pid` (children, their children...)."""
    parents = _parent_map()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def processes_with(marker: str) -> list[int]:
    """Living processes whose command line contains `marker` (zombies have none, so do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def real_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


async def until_gone(marker: str) -> list[int]:
    """Wait (within the hang guard) until no process carries `marker`; return what is left."""
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        while processes_with(marker):
            await asyncio.sleep(0.05)
    return processes_with(marker)


def sandbox_marker() -> str:
    return f"palimpsest-sandbox-test-{os.getpid()}-{os.urandom(6).hex()}"
