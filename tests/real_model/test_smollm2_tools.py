"""The real model calling the service's tools (issue 35): llama-cpp-python's server with its
`chatml-function-calling` format, which puts the tools in SmolLM2's prompt and constrains the
answer to a message or a call (with `tool_choice`, which the openai provider names; it cannot
stream a call, so the provider asks for whole answers: `PALIMPSEST_OPENAI_STREAM=0`). A session
reads a large file (its result is offloaded) and starts a child session, which makes its own model
calls, with no request over the window. (Compaction is `test_smollm2.py`'s long session: a session
that also takes notes until it compacts did not compact in eight notes here, see
docs/real-model.md.)
The format does not show the model the results of its calls (no `tool` role in it): what is
checked is the service's side of each call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.models import Observation
from sessions_app.engine import runner
from sessions_app.models import AgentSession, ModelCall
from tests.real_model.conftest import LOCAL
from tests.real_model.llama_server import N_CTX, LlamaServer
from tests.real_model.test_smollm2 import (
    MODEL,
    TURN_SECONDS,
    calls_of,
    figures,
    over_window,
    report,
    turn,
)

pytestmark = [pytest.mark.real_model, pytest.mark.django_db(transaction=True)]
# Asked until the model does it (each a turn of at most MAX_STEPS steps).
READ_ASKS = [
    "Call fs_read with the path big.log.",
    "Read the file big.log with the fs_read tool.",
    "Use fs_read on big.log now.",
]
SPAWN_ASKS = [
    "Call spawn_session with the task: count the ERROR lines of big.log.",
    "Use spawn_session to start a sub-session that summarizes big.log.",
    "Start a sub-session with spawn_session for the task: list the cities.",
]
MAX_STEPS = 3


@pytest.fixture(scope="module")
def tools_server() -> Iterator[LlamaServer]:
    server = LlamaServer(LOCAL / "llama-server-tools.log", chat_format="chatml-function-calling").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tools_llama(tools_server: LlamaServer, settings: Any, tmp_path: Path) -> LlamaServer:
    settings.PALIMPSEST_PROVIDER = "openai"
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = tools_server.url
    settings.PALIMPSEST_OPENAI_STREAM = False
    settings.PALIMPSEST_MODEL_IDLE_SECONDS = 600
    settings.PALIMPSEST_MAX_OUTPUT_TOKENS = 256
    lines = [f"INFO 2026-11-27 10:{i // 60 % 60:02d}:{i % 60:02d} event number {i}\n" for i in range(4000)]
    (tmp_path / "big.log").write_text("".join(lines) + "ERROR 2026-11-27 23:59:59 the last one\n")
    settings.PALIMPSEST_FS_ROOT = str(tmp_path)
    return tools_server


def _called(frames: list[dict], name: str) -> list[dict]:
    return [f for f in frames if f["type"] == "tool.call" and f["name"] == name]


async def test_the_model_reads_a_large_file_offloaded_and_starts_a_child(connect, tools_llama: LlamaServer):
    client = await connect()
    session = await client.create(
        model=MODEL,
        context_window=N_CTX,
        compact_threshold=0.5,
        settings={"max_steps_per_turn": MAX_STEPS, "compaction": {"summary_max_tokens": 400}},
    )
    started = time.monotonic()
    asked: list[str] = []
    read: list[dict] = []
    for ask in READ_ASKS:
        asked.append(ask)
        read = _called(await turn(client, session["id"], ask), "fs_read")
        if read:
            break
    spawned: list[dict] = []
    for ask in SPAWN_ASKS:
        asked.append(ask)
        frames = await turn(client, session["id"], ask)
        spawned = [f for f in frames if f["type"] == "session.spawned"]
        if spawned:
            break
    # A child runs on after its parent's turn: its turn ends too (a few steps at most).
    await runner.turns_wait_idle(timeout=TURN_SECONDS)
    seconds = time.monotonic() - started

    ids = [session["id"], *(f["child_session_id"] for f in spawned)]
    calls = await sync_to_async(lambda: [c for i in ids for c in calls_of(i)])()
    observations = await sync_to_async(lambda: list(Observation.objects.filter(session_id=session["id"])))()
    report(
        "tools",
        {
            "seconds": round(seconds, 1),
            "asked": asked,
            "read": [f["input"] for f in read],
            "spawned": [f.get("title") or f.get("task") for f in spawned],
            "observations": len(observations),
            "calls": figures(calls),
        },
    )
    assert read, "the model never called fs_read"
    assert observations, "the file's result was not offloaded"
    assert spawned, "the model never started a child"
    child = await AgentSession.objects.aget(pk=spawned[0]["child_session_id"])
    assert await ModelCall.objects.filter(session=child).aexists(), "the child made no model call"
    assert over_window(calls, N_CTX) == []
    await client.close()
