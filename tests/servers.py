"""Real server processes for end-to-end tests: daphne serving the project, as PROTOCOL.md says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

BASE_DIR = Path(__file__).resolve().parent.parent
WS_LIMIT = "33554432"
# Variables of the test process that must not leak into a server configured by its test.
_SCRUBBED = (
    "DATABASE_URL",
    "REDIS_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PALIMPSEST_PROVIDER",
    "PALIMPSEST_DEFAULT_MODEL",
    "DJANGO_SETTINGS_MODULE",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    # The local development defaults (DEBUG, a fixed key, plain HTTP), chosen explicitly.
    env.update({"PALIMPSEST_DEV": "1", "PALIMPSEST_PROVIDER": "scripted", "PALIMPSEST_POLL_SECONDS": "0.1"})
    env.update(overrides)
    return env


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


class Daphne:
    """`daphne ... config.asgi:application` on a free port, with the documented websocket limits."""

    def __init__(self, env: dict[str, str], log_path: Path, app: str = "config.asgi:application") -> None:
        self.env = env
        self.app = app
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/agent/"

    def start(self) -> Daphne:
        daphne = str(Path(sys.executable).with_name("daphne"))
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                daphne,
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "--websocket-max-message-size",
                WS_LIMIT,
                "--websocket-max-frame-size",
                WS_LIMIT,
                self.app,
            ],
            cwd=BASE_DIR,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne did not start:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        """SIGKILL, as a crash would: nothing of the process runs after this (no cleanup)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Daphne:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
