"""The real model calling the service's tools (issue 35): llama-cpp-python's server with its
`chatml-function-calling` format, which puts the tools in SmolLM2's prompt and constrains the
answer to a message or a call (with `tool_choice`, which the openai provider names; it cannot
stream a call, so the provider asks for whole answers: `PALIMPSEST_OPENAI_STREAM=0`). A session
reads a large file (its result is offloaded) and starts a child session, which makes its own model
calls, with no request over the window; and one session does all of issue 35 at once: the file
offloaded, a child, and two compactions by the threshold whose summaries the model writes, then a turn
in the new epoch (docs/real-model.md).
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
from sessions_app.models import AgentSession, Archive, ModelCall
from tests.real_model.conftest import LOCAL
from tests.real_model.llama_server import N_CTX, LlamaServer
from tests.real_model.test_smollm2 import (
    MODEL,
    NOTE_WORDS,
    TURN_SECONDS,
    calls_of,
    figures,
    note,
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


# The whole of issue 35 in one session: the file read (offloaded), a child, and compactions. The
# window is the server's; the threshold is low enough that a few notes on top of the fixed part
# (the tools and system prompt: about 2,000 of the server's tokens) cross it, and high enough that
# the epoch after a compaction (the fixed part, the summary, the carried turn) starts under it.
ONE_SESSION_THRESHOLD = 0.45
MAX_NOTES = 10
# Compactions asked of the one session (the issue: "a long session with compactions").
COMPACTIONS_WANTED = 2
# Asked in turn until the model does it (one call each, a few seconds from the server's cached
# prefix). The model picks a tool's name greedily and copies the calls its history holds: asked to
# read first, it calls fs_read (its paths vary: asked until a read is offloaded); with reads in its
# history, asked to spawn, it calls spawn_session. A call of another tool in the history (a fork,
# count_words) tends to be copied ever after.
ONE_SESSION_READ_ASKS = [READ_ASKS[0], 'Call fs_read with {"path": "big.log"}.', READ_ASKS[2]]
ONE_SESSION_SPAWN_ASKS = SPAWN_ASKS[1:]
ASK_ROUNDS = 3
ONE_SESSION_SETTINGS = {
    # One model call a turn: the model (which never reads its results) calls a tool at nearly
    # every step, and every step is a model call on a CPU. A turn's last call is still run.
    "max_steps_per_turn": 1,
    "compaction": {"summary_max_tokens": 400},
    # One child in the tree, and none of its own: the model starts sub-sessions whenever it can.
    "subsessions": {"max_depth": 1, "max_per_tree": 1},
}


def _own(frames: list[dict], session_id: str, kind: str) -> list[dict]:
    return [f for f in frames if f["type"] == kind and f.get("session_id") == session_id]


async def test_one_session_reads_offloaded_starts_a_child_and_compacts_inside_the_window(
    connect, tools_llama: LlamaServer
):
    client = await connect()
    session = await client.create(
        model=MODEL,
        context_window=N_CTX,
        compact_threshold=ONE_SESSION_THRESHOLD,
        settings=ONE_SESSION_SETTINGS,
    )
    sid = session["id"]
    started = time.monotonic()
    asked: list[str] = []
    frames: list[dict] = []
    # The file's read, offloaded: an observation of the session's fs_read.
    offloaded = Observation.objects.filter(session_id=sid, tool_name="fs_read")

    async def ask(content: str) -> list[dict]:
        asked.append(content[:60])
        got = await turn(client, sid, content)
        frames.extend(got)
        assert _own(got, sid, "turn.completed")[-1]["stop_reason"] in ("end_turn", "max_steps"), got[-3:]
        return got

    compacted_at: list[int] = []
    try:
        for content in ONE_SESSION_READ_ASKS * ASK_ROUNDS:
            if await offloaded.aexists():
                break
            await ask(content)
        for content in ONE_SESSION_SPAWN_ASKS * ASK_ROUNDS:
            if _own(frames, sid, "session.spawned"):
                break
            await ask(content)
        # A child's turn may run on after its parent's: let it end (one server for both).
        await runner.turns_wait_idle(timeout=TURN_SECONDS)
        ready = _own(frames, sid, "session.spawned") and await offloaded.aexists()
        for index in range(MAX_NOTES if ready else 0):
            got = await ask(f"{note(index, NOTE_WORDS)}\nReply with one sentence about this note.")
            if _own(got, sid, "compaction.completed"):
                compacted_at.append(len(asked))
                if len(compacted_at) >= COMPACTIONS_WANTED:
                    break
        if ready:
            await ask("Which cities did the field notes come from?")
        await runner.turns_wait_idle(timeout=TURN_SECONDS)
    finally:  # the figures of a failed run are wanted too
        spawned = _own(frames, sid, "session.spawned")
        ids = [sid, *(f["child_session_id"] for f in spawned)]
        calls = await sync_to_async(lambda: [c for i in ids for c in calls_of(i)])()
        archives = await sync_to_async(lambda: list(Archive.objects.filter(session_id=sid)))()
        observations = await offloaded.acount()
        stored = await AgentSession.objects.aget(pk=sid)
        compactions = _own(frames, sid, "compaction.completed")
        report(
            "one_session",
            {
                "seconds": round(time.monotonic() - started, 1),
                "asked": asked,
                "compacted_at_turn": compacted_at,
                "tools_called": [(f["name"], f["input"]) for f in _own(frames, sid, "tool.call")],
                "spawned": [f.get("mode") for f in spawned],
                "observations": observations,
                "compactions": [
                    {k: f.get(k) for k in ("kind", "trigger", "duration_ms")} for f in compactions
                ],
                "summaries": [a.summary[:300] for a in archives],
                "token_ratio": stored.token_ratio,
                "calls": [
                    {"session": "root" if str(c.session_id) == sid else "child", **f}
                    for c, f in zip(calls, figures(calls), strict=True)
                ],
            },
        )
    assert _called(_own(frames, sid, "tool.call"), "fs_read"), "the model never called fs_read"
    assert observations, "the file's result was not offloaded"
    assert spawned, "the model never started a child"
    assert [c for c in calls if str(c.session_id) != sid], "the child made no model call"
    by_threshold = [f for f in compactions if f.get("trigger") == "threshold"]
    assert len(by_threshold) >= COMPACTIONS_WANTED, f"{len(by_threshold)} compactions by the threshold"
    own_calls = [c for c in calls if str(c.session_id) == sid]
    summaries = [c for c in own_calls if c.purpose == "summary"]
    assert summaries and all(c.output_tokens > 0 for c in summaries)
    assert archives and all(a.summary.strip() for a in archives)
    # A turn's model call after the (last) summary: the session went on in the new epoch.
    assert [c for c in own_calls if c.purpose == "turn" and c.started_at > summaries[-1].started_at]
    assert over_window(calls, N_CTX) == []
    await client.close()
