"""Helpers shared by the notepad tests."""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.notepad import services as memory_services
from memory_app.notepad.models import NotepadRevision
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.common.db import db
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import AgentSession, SessionEvent


def session_make(**settings: Any) -> AgentSession:
    return engine_sessions.session_create(owner=None, settings=settings or None)


def notepad_row(session: AgentSession) -> tuple[str | None, int]:
    session.refresh_from_db(fields=["notepad", "notepad_version"])
    return session.notepad, session.notepad_version


def notepad_events(session: AgentSession) -> list[dict]:
    return [
        e.payload
        for e in SessionEvent.objects.filter(session=session, type="notepad.updated").order_by("seq")
    ]


def revisions(session: AgentSession) -> list[tuple[int, str, str, str]]:
    return [
        (r.version, r.author, r.operation, r.content)
        for r in NotepadRevision.objects.filter(session=session).order_by("version")
    ]


# -- model-facing flows (fake Messages API or scripted model, over the agent websocket) ----------
async def turn(client: Any, content: str = "go") -> list[dict]:
    """Send a user message and return every frame up to and including `turn.completed`."""
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed")


async def notepad_preset(session: dict, content: str) -> None:
    await db(memory_services.notepad_write)(
        session_id=uuid.UUID(session["id"]), content=content, author=AGENT_AUTHOR
    )


def tool_result_sent(body: dict) -> dict:
    """The (only) tool_result block of the request's last message."""
    blocks = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert len(blocks) == 1, body["messages"][-1]
    return blocks[0]


def system_texts(body: dict) -> list[str]:
    return [block["text"] for block in body.get("system", [])]


def notepad_last_section(body: dict) -> str:
    """The last `## Session Notepad` section the model reads, system prompt then messages, from
    its heading on: the current notepad in every position (`epoch` shows the changed one with the
    latest message, after words that say so). A system prompt given as one string (the Chat
    Completions fake's view) is one text."""
    system = body.get("system", [])
    texts = [system] if isinstance(system, str) else [block["text"] for block in system]
    for message in body["messages"]:
        texts += [b["text"] for b in message["content"] if b.get("type") == "text"]
    sections = [t for t in texts if NOTEPAD_SECTION_HEAD in t]
    assert sections, "no notepad section in the request"
    return NOTEPAD_SECTION_HEAD + sections[-1].rsplit(NOTEPAD_SECTION_HEAD, 1)[1]


NOTEPAD_SECTION_HEAD = "## Session Notepad\n"
