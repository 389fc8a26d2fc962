"""Helpers of the MCP tests: the real reference servers (`mcp-server-time`, `mcp-server-git`
from PyPI) and small servers the tests write, configurations for them, and sessions driven by
the scripted model over the agent websocket."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Only a hang guard: a server's first start (a Python process) may take seconds on a busy machine.
TURN_GUARD_SECONDS = 90
BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
SECRET = "s3cr3t-canary-7f1c2e"


def time_config() -> dict[str, Any]:
    return {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}


def git_config(repo: Path) -> dict[str, Any]:
    return {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(repo)]}


def script_config(name: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A server of `servers/<name>.py`, run by this interpreter."""
    return {
        "command": sys.executable,
        "args": [str(HERE / "servers" / f"{name}.py"), *args],
        "env": env or {},
    }


def git_repo(root: Path) -> Path:
    """A repository with two commits, made with the git command line."""
    assert shutil.which("git"), "git is needed by mcp-server-git"
    repo = root / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=Tester"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], check=True)
    (repo / "a.txt").write_text("two\n")
    subprocess.run([*git, "commit", "-q", "-am", "second commit"], check=True)
    (repo / "untracked.txt").write_text("new\n")
    return repo


async def create(client: Any, **fields: Any) -> dict:
    """`session.create`, waiting as long as a server's first start may take."""
    await client.send({"type": "session.create", **fields})
    reply = await client.recv(timeout=TURN_GUARD_SECONDS)
    assert reply["type"] == "session.created", reply
    return reply["session"]


async def turn(client: Any, content: str) -> list[dict]:
    """A turn's frames. An MCP tool's call waits for an approval by default (DESIGN.md: approvals):
    each `tool.approval_requested` is approved here, as the owning client would."""
    await client.send({"type": "user.message", "content": content})
    frames = []
    while True:
        frame = await client.recv(timeout=TURN_GUARD_SECONDS)
        frames.append(frame)
        if frame["type"] == "tool.approval_requested":
            await client.send({"type": "tool.approve", "tool_use_id": frame["tool_use_id"]})
        if frame["type"] == "turn.completed":
            return frames


def call(name: str, args: dict) -> str:
    """The scripted model's message that calls tool `name`."""
    return f"tool {name} {json.dumps(args)}"


def result(frames: list[dict]) -> dict:
    found = [f for f in frames if f["type"] == "tool.result"]
    assert len(found) == 1, frames
    return found[0]


def text_of(frame: dict) -> str:
    content = frame["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


@contextlib.contextmanager
def http_server(name: str = "growing") -> Iterator[str]:
    """`servers/<name>.py` over streamable HTTP on a free port, in a process of its own; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(HERE / "servers" / f"{name}.py"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + TURN_GUARD_SECONDS
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert process.poll() is None, "the MCP HTTP server ended"
            assert time.monotonic() < deadline, "the MCP HTTP server did not listen"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for(predicate: Any, timeout: float = TURN_GUARD_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
