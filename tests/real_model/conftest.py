"""The real model's fixtures: one llama.cpp server for the module, the service pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_model.llama_server import LlamaServer

LOCAL = Path(__file__).resolve().parent.parent.parent / ".local"


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    server = LlamaServer(LOCAL / "llama-server.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llama(llama_server: LlamaServer, settings: Any) -> LlamaServer:
    """The service's openai provider pointed at the server by its base URL alone (no key)."""
    settings.PALIMPSEST_PROVIDER = "openai"
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = llama_server.url
    # A model on two CPU cores: a long prompt is read for many seconds before its first token.
    settings.PALIMPSEST_MODEL_IDLE_SECONDS = 600
    # Short answers (the window's arithmetic may lower it further): a 135M model may ramble on
    # for thousands of tokens, minutes each on a busy CPU.
    settings.PALIMPSEST_MAX_OUTPUT_TOKENS = 256
    return llama_server
