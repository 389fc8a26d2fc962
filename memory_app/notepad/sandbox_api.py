"""The session notepad's sandbox API (seed 000, "Sandbox API"): `session.notepad.read()`,
`write(content)`, `append(text)`, handed to every server tool as `ctx.sandbox["notepad"]`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from memory_app.notepad import selectors, services
from memory_app.notepad.context import notepad_enabled
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.common.db import db
from sessions_app.engine.contract import SessionSnapshot, ToolContext, ToolError

SANDBOX_NAME = "notepad"


@dataclass(frozen=True)
class SessionNotepad:
    """`session.notepad` of the seed's sandbox API, for server tools: `ctx.sandbox["notepad"]`.

    Writes are the agent's (author `agent`) and go through the same service as the notepad tools:
    serialized with every other edit, one revision and one `notepad.updated` event each, or, on
    the notepad `burst()` gives, one revision and one event for the whole burst. An edit that
    cannot apply (e.g. past the size limit) raises `ToolError`, which a tool may catch or let
    through to the model.
    """

    session_id: uuid.UUID
    edits: services.NotepadBurst | None = None
    # The tool call whose edits these are (outside a burst, each edit's `notepad.updated` names
    # it: an authored tool's progress notes, shown under the call as they arrive).
    tool_use_id: str | None = None

    def for_call(self, tool_use_id: str) -> SessionNotepad:
        """This notepad, each edit its own revision and event, naming the call `tool_use_id`."""
        return dataclasses.replace(self, edits=None, tool_use_id=tool_use_id)

    @contextlib.asynccontextmanager
    async def burst(self) -> AsyncIterator[SessionNotepad]:
        """This notepad, with every edit made through it inside the block sharing one revision
        and one `notepad.updated` event (`services.NotepadBurst`): each edit is stored at once,
        the event is sent when the block ends, however it ends (an error, a cancel)."""
        edits = services.NotepadBurst(author=AGENT_AUTHOR)
        try:
            yield dataclasses.replace(self, edits=edits)
        finally:
            # Shielded: a cancelled run still announces what it wrote.
            await asyncio.shield(db(services.notepad_burst_announce)(session_id=self.session_id, burst=edits))

    async def read(self) -> str:
        state = await db(selectors.notepad_get)(session_id=self.session_id)
        return state.content

    async def write(self, content: str) -> None:
        if not isinstance(content, str):
            raise TypeError("notepad.write(content): content must be a string")
        try:
            await db(services.notepad_write)(
                session_id=self.session_id,
                content=content,
                author=AGENT_AUTHOR,
                burst=self.edits,
                tool_use_id=self.tool_use_id,
            )
        except services.NotepadEditError as exc:
            raise ToolError(str(exc)) from exc

    async def append(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError("notepad.append(text): text must be a string")
        try:
            await db(services.notepad_update)(
                session_id=self.session_id,
                operation="append",
                content=text,
                author=AGENT_AUTHOR,
                burst=self.edits,
                tool_use_id=self.tool_use_id,
            )
        except services.NotepadEditError as exc:
            raise ToolError(str(exc)) from exc


def sandbox_notepad(session: SessionSnapshot) -> SessionNotepad | None:
    """The notepad feature's sandbox factory: no notepad where it is switched off."""
    return SessionNotepad(session_id=session.id) if notepad_enabled(session) else None


def notepad_of(ctx: ToolContext) -> SessionNotepad | None:
    """The session notepad a server tool was handed (None when the session has it switched off)."""
    api = ctx.sandbox.get(SANDBOX_NAME)
    return api if isinstance(api, SessionNotepad) else None
