"""A real model that no one here wrote, end to end and offline: llama-cpp-python's server with
SmolLM2-135M-Instruct (`make test-real-model`; docs/real-model.md has what it found).

SmolLM2's own chat template does not show the model the tools (test_smollm2_tools.py uses the
server's format that does), so these tests check the plumbing: a streamed answer, the server's
own token counts feeding the estimate's calibration, compactions whose summaries the model writes
inside a small window, and a session that goes on after them with no request over the window."""

from __future__ import annotations

import json
import os
import platform
import random
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.engine.providers.openai.mapping import chat_request
from sessions_app.models import AgentSession, Archive, ModelCall
from tests.real_model.conftest import LOCAL
from tests.real_model.llama_server import MODEL_ALIAS, N_CTX, LlamaServer

pytestmark = [pytest.mark.real_model, pytest.mark.django_db(transaction=True)]
MODEL = f"openai/{MODEL_ALIAS}"
TURN_SECONDS = 900
# A session of this many notes of this many words (about 1.7 of the server's tokens a word)
# compacts after its seventh note at a threshold of half the window.
TURNS = 10
NOTE_WORDS = 450
REPORT = LOCAL / "real-model-report.json"
WORDS = [
    "river",
    "harbour",
    "lantern",
    "orchard",
    "granite",
    "meadow",
    "compass",
    "ledger",
    "violin",
    "glacier",
    "copper",
    "saddle",
    "thunder",
    "willow",
    "beacon",
    "canyon",
    "marble",
    "falcon",
    "quarry",
    "timber",
    "velvet",
    "anchor",
    "prairie",
    "ember",
]
CITIES = ["Lisbon", "Tromso", "Quito", "Osaka", "Tunis", "Hobart", "Riga", "Cusco"]


def note(index: int, words: int) -> str:
    """About `words` words of a field note, different for each `index` (seeded)."""
    pick = random.Random(index)
    city = CITIES[index % len(CITIES)]
    sentences = [f"Field note {index} from {city}."]
    while sum(len(s.split()) for s in sentences) < words:
        a, b, c = pick.sample(WORDS, 3)
        sentences.append(f"In {city} the {a} stood near the {b}, and the {c} counted {pick.randint(2, 999)}.")
    return " ".join(sentences)


async def turn(client: Any, session_id: str, content: str) -> list[dict]:
    """Send a user message and receive the frames up to the session's own `turn.completed`: a
    sub-session's events reach its root's connection too, its `turn.completed` among them, and a
    message sent when that one came would be refused while the session's own turn still runs. An
    `error` frame of the session's own (the message refused, the turn failed) fails the test."""
    await client.send({"type": "user.message", "content": content})
    frames: list[dict] = []
    while True:
        frame = await client.recv(timeout=TURN_SECONDS)
        frames.append(frame)
        own = frame.get("session_id") in (None, session_id)
        assert not (own and frame["type"] == "error"), f"{frame.get('code')}: {frame.get('message')}"
        if own and frame["type"] == "turn.completed":
            return frames


def calls_of(session_id: Any) -> list[ModelCall]:
    return list(ModelCall.objects.filter(session_id=session_id).order_by("started_at"))


def figures(calls: list[ModelCall]) -> list[dict[str, Any]]:
    return [
        {
            "purpose": c.purpose,
            "prompt_tokens": c.prompt_tokens,
            "estimated_prompt_tokens": c.estimated_prompt_tokens,
            "predicted_prompt_tokens": c.predicted_prompt_tokens,
            "max_tokens": c.request.get("max_tokens"),
            "output_tokens": c.output_tokens,
            "duration_ms": c.duration_ms,
            "first_token_ms": c.first_token_ms,
            "counted": bool(c.response and c.response.get("prompt_tokens_counted")),
            # What the answer was: its blocks' kinds (a tool call by its name).
            "answer": [
                b.get("name", "") if b.get("type") == "tool_use" else b.get("type", "")
                for b in (c.response or {}).get("content") or []
            ],
        }
        for c in calls
    ]


def report(name: str, data: dict[str, Any]) -> None:
    """The figures for docs/real-model.md, kept in .local/real-model-report.json."""
    LOCAL.mkdir(exist_ok=True)
    known = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    known["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    known[name] = data
    REPORT.write_text(json.dumps(known, indent=2))


def over_window(calls: list[ModelCall], window: int) -> list[dict[str, Any]]:
    return [f for f in figures(calls) if f["prompt_tokens"] + (f["max_tokens"] or 0) > window]


async def test_a_streamed_answer_with_the_servers_own_token_counts(connect, llama: LlamaServer):
    client = await connect()
    session = await client.create(model=MODEL, context_window=N_CTX)
    assert session["provider"] == "openai"
    started = time.monotonic()
    frames = await turn(client, session["id"], "Name three colours of the sea, in one short sentence.")
    seconds = time.monotonic() - started
    kinds = [f["type"] for f in frames]
    assert "assistant.delta" in kinds and "assistant.message" in kinds, kinds
    assert kinds.index("assistant.delta") < kinds.index("assistant.message")
    deltas = "".join(f["text"] for f in frames if f["type"] == "assistant.delta")
    message = next(f for f in frames if f["type"] == "assistant.message")
    assert deltas.strip() and deltas == message["content"][0]["text"]
    assert frames[-1]["stop_reason"] in ("end_turn", "max_tokens")

    (call,) = await sync_to_async(calls_of)(session["id"])
    # The prompt's count is the server's (its tokenizer and chat template), not our estimate.
    assert call.response and call.response.get("prompt_tokens_counted")
    assert "usage_estimated" not in call.response
    body = await sync_to_async(selectors.model_call_request)(call=call)
    served = await sync_to_async(llama.prompt_tokens)(chat_request(body, base_url=llama.url))
    assert call.prompt_tokens == served
    assert call.prompt_tokens != call.estimated_prompt_tokens
    stored = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    observed = call.prompt_tokens / call.estimated_prompt_tokens
    assert stored.token_ratio != 1.0
    assert min(1.0, observed) <= stored.token_ratio <= max(1.0, observed)
    report(
        "streamed_answer",
        {
            "seconds": round(seconds, 1),
            "deltas": kinds.count("assistant.delta"),
            "answer": deltas[:300],
            "token_ratio": stored.token_ratio,
            "calls": figures([call]),
        },
    )
    await client.close()


async def test_a_long_session_compacts_with_the_models_summaries_and_no_request_is_over_the_window(
    connect, llama: LlamaServer
):
    client = await connect()
    settings = {"compaction": {"summary_max_tokens": 400}}
    session = await client.create(model=MODEL, context_window=N_CTX, compact_threshold=0.5, settings=settings)
    started = time.monotonic()
    compactions: list[dict] = []
    turns_after: list[str] = []
    for index in range(TURNS):
        frames = await turn(
            client, session["id"], f"{note(index, NOTE_WORDS)}\nReply with one sentence about this note."
        )
        assert frames[-1]["stop_reason"] in ("end_turn", "max_tokens"), frames[-3:]
        done = [f for f in frames if f["type"] == "compaction.completed"]
        if compactions and not done:
            turns_after.append(frames[-1]["stop_reason"])
        compactions += done
    frames = await turn(client, session["id"], "Which cities did the field notes come from?")
    assert frames[-1]["stop_reason"] in ("end_turn", "max_tokens")
    compactions += [f for f in frames if f["type"] == "compaction.completed"]
    seconds = time.monotonic() - started

    calls = await sync_to_async(calls_of)(session["id"])
    archives = await sync_to_async(lambda: list(Archive.objects.filter(session_id=session["id"])))()
    stored = await sync_to_async(AgentSession.objects.get)(pk=session["id"])
    report(  # before the checks: the figures of a failed run are wanted too
        "long_session",
        {
            "seconds": round(seconds, 1),
            "turns": TURNS + 1,
            "compactions": [{k: f.get(k) for k in ("kind", "trigger", "duration_ms")} for f in compactions],
            "token_ratio": stored.token_ratio,
            "summaries": [a.summary[:300] for a in archives],
            "calls": figures(calls),
        },
    )
    assert compactions, "no compaction"
    assert turns_after, "no turn ran after a compaction"
    summaries = [c for c in calls if c.purpose == "summary"]
    assert summaries and all(c.output_tokens > 0 for c in summaries)
    assert archives and all(a.summary.strip() for a in archives)
    # A summary call's record keeps no `raw` (records.summary_call_data): the turns' say it.
    turns = [c for c in calls if c.purpose == "turn"]
    assert all(c.response and c.response.get("prompt_tokens_counted") for c in turns)
    assert over_window(calls, N_CTX) == []
    await client.close()
