"""Helpers of the export/import tests: a session with every kind of row the document carries,
run by the real engine (the scripted model), and its next request compared with its copy's."""

from __future__ import annotations

import json
import uuid
from typing import Any

from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.models import AgentSession, MaskedResult, ModelCall, Turn

FILLER = "palimpsest " * 300
BIG = "row " * 1500  # 6,000 bytes: over offload.threshold_bytes (4,096), stored as an observation


async def chat(client: Any, content: str, session_id: Any = None) -> list[dict]:
    """Send a user message; the frames up to its turn's turn.completed (a sub-session's own
    turn.completed, which the parent's connection sees too, is not the end of it)."""
    await client.send({"type": "user.message", "content": content})
    frames = []
    while True:
        frames.extend(await client.until("turn.completed", timeout=30))
        if session_id is None or frames[-1]["session_id"] == str(session_id):
            errors = [f for f in frames if f["type"] == "error"]
            assert not errors, errors
            return frames


async def attach(client: Any, session_id: Any) -> None:
    await client.send({"type": "session.attach", "session_id": str(session_id)})
    await client.until("session.attached", timeout=30)


async def full_session(connect: Any, token: str, *, agent: str | None = None) -> dict:
    """A session run by the scripted model with notepad and scratchpad edits, an offloaded
    result (an observation), a task, a child, a masked result and a compaction."""
    client = await connect(token)
    fields: dict[str, Any] = {
        "context_window": 12_000,
        "compact_threshold": 0.4,
        "system_prompt": "You help.",
    }
    if agent is not None:
        fields["agent"] = agent
    session = await client.create(**fields)
    await chat(client, "remember: the Q3 gap is in EMEA", session["id"])
    await chat(client, "plan: read; check; report", session["id"])
    await chat(client, "note: rows 234-267", session["id"])
    await chat(client, "tool test_echo " + json.dumps({"text": BIG}), session["id"])
    await chat(client, 'task count: tool test_echo {"text": "one"}', session["id"])
    await chat(client, "spawn Check the EMEA rows.", session["id"])
    await chat(client, "fork Check the APAC rows.", session["id"])
    for index in range(12):
        frames = await chat(client, f"request {index}: {FILLER}", session["id"])
        if any(f["type"] == "compaction.completed" for f in frames):
            break
    else:
        raise AssertionError("no compaction")
    await chat(client, "tool test_echo " + json.dumps({"text": BIG.upper()}), session["id"])
    await chat(client, "remember: after the compaction", session["id"])
    await client.close()
    return session


async def one_more_result(connect: Any, token: str, session_id: Any) -> None:
    """Another offloaded result, in view in the next request (its observation's id with it)."""
    client = await connect(token)
    await attach(client, session_id)
    await chat(client, "tool test_echo " + json.dumps({"text": BIG.title()}), session_id)
    await client.close()


def mask_latest_result(session_id: uuid.UUID) -> str:
    """Mask the session's newest echo result as compaction's cheap tier does (a row, then the
    process's prepared history read again)."""
    from sessions_app.engine.history import history_forget
    from sessions_app.models import ToolCall

    session = AgentSession.objects.get(pk=session_id)
    call = ToolCall.objects.filter(session_id=session_id, name="test_echo").order_by("-created_at").first()
    assert call is not None
    MaskedResult.objects.create(
        session_id=session_id,
        epoch=session.epoch,
        tool_use_id=call.tool_use_id,
        size_chars=len(json.dumps(call.result)),
        placeholder="[masked for the test]",
    )
    history_forget(session_id)
    return call.tool_use_id


async def next_request(connect: Any, token: str, session_id: Any, content: str = "echo next") -> dict:
    """The body of the first model request of a new turn in the session."""
    client = await connect(token)
    await attach(client, session_id)
    await chat(client, content, session_id)
    await client.close()

    def first_of_last_turn() -> dict:
        turn = Turn.objects.filter(session_id=session_id).order_by("-started_at").first()
        call = ModelCall.objects.filter(turn=turn, purpose="turn").order_by("started_at", "pk").first()
        assert call is not None
        return selectors.model_call_request(call=call)

    return await sync_to_async(first_of_last_turn)()


def id_pairs(original: uuid.UUID, imported: uuid.UUID) -> dict[str, str]:
    """The imported tree's own ids → the original's: sessions (matched in creation order) and
    observations (by their tool call's id). Nothing else may differ."""
    from memory_app.observations.models import Observation

    pairs: dict[str, str] = {}

    def walk(old: uuid.UUID, new: uuid.UUID) -> None:
        pairs[str(new)] = str(old)
        old_obs = dict(Observation.objects.filter(session_id=old).values_list("tool_use_id", "id"))
        for tool_use_id, new_id in Observation.objects.filter(session_id=new).values_list(
            "tool_use_id", "id"
        ):
            pairs[new_id] = old_obs[tool_use_id]
        old_children = list(
            AgentSession.objects.filter(parent_session_id=old)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)
        )
        new_children = list(
            AgentSession.objects.filter(parent_session_id=new)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)
        )
        assert len(old_children) == len(new_children)
        for a, b in zip(old_children, new_children, strict=True):
            walk(a, b)

    walk(original, imported)
    return pairs


def normalised(body: Any, pairs: dict[str, str]) -> str:
    text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    for new, old in pairs.items():
        text = text.replace(new, old)
    return text
