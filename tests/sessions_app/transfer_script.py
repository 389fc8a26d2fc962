"""Run by `manage.py shell -c` in a subprocess against another database (the export tests'
SQLite → PostgreSQL round trip): a session run by the scripted model, and its next request."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

from sessions_app import selectors, services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.runner import turn_start, turn_wait
from sessions_app.models import ModelCall, Turn

FILLER = "palimpsest " * 300


async def _turns(session_id: uuid.UUID, contents: list[str], *, until_compacted: bool = False) -> None:
    from sessions_app.common.db import db
    from sessions_app.models import AgentSession

    for content in contents:
        await turn_wait(await turn_start(session_id=session_id, content=content))
    if until_compacted:
        for index in range(12):
            await turn_wait(await turn_start(session_id=session_id, content=f"request {index}: {FILLER}"))
            epoch = await db(
                lambda: AgentSession.objects.values_list("epoch", flat=True).get(pk=session_id)
            )()
            if epoch:
                return
        raise AssertionError("no compaction")


def build() -> None:
    """A session with a notepad line, a plan, a task, a child and a compaction; its id printed."""
    token, _ = services.agent_token_create(name="exporter")
    session = engine_sessions.session_create(
        owner=token, context_window=12_000, compact_threshold=0.4, system_prompt="You help."
    )
    asyncio.run(
        _turns(
            session.pk,
            [
                "remember: the Q3 gap is in EMEA",
                "plan: read; check",
                "task count: echo one",
                "spawn Check the rows.",
            ],
            until_compacted=True,
        )
    )
    asyncio.run(_turns(session.pk, ["remember: after the compaction"]))
    sys.stdout.write(f"{session.pk}\n")


def next_request(session_id: str, path: str) -> None:
    """Run a turn "echo next"; write its first model request's body to `path`."""
    session = uuid.UUID(session_id)
    asyncio.run(_turns(session, ["echo next"]))
    turn = Turn.objects.filter(session_id=session).order_by("-started_at").first()
    call = ModelCall.objects.filter(turn=turn, purpose="turn").order_by("started_at", "pk").first()
    assert call is not None
    Path(path).write_text(json.dumps(selectors.model_call_request(call=call)))
