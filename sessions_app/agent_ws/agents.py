"""The agent websocket's frames about agents and ending sessions (PROTOCOL.md v1.2): `agent.create`,
`agent.get`, `session.create`'s `agent`, `session.end`. A mixin of `AgentConsumer`: its handlers
use the consumer's token, attachment and replies."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from sessions_app import agent_selectors, services
from sessions_app.agent_ws.frames import FrameError
from sessions_app.authors import client_author
from sessions_app.engine import agents as engine_agents
from sessions_app.models import Agent, AgentSession, AgentToken, SessionStatus

AGENT_NOT_FOUND = "no agent named {name!r} (agents are the client's own: create it with agent.create)"


class AgentFrames:
    """Handlers of PROTOCOL.md v1.2's agent frames (mixed into `AgentConsumer`)."""

    token: AgentToken | None

    if TYPE_CHECKING:  # the consumer's

        async def _send(self, frame: dict, request_id: Any) -> None: ...

        async def _send_error(self, code: str, message: str, request_id: Any) -> None: ...

        async def _session_for_token(self, session_id: str, request_id: Any) -> AgentSession: ...

        def _attached(self, request_id: Any) -> uuid.UUID: ...

    def _owner_name(self) -> str:
        assert self.token is not None
        return self.token.name

    async def on_agent_create(self, frame: dict, request_id: Any) -> None:
        try:
            agent = await database_sync_to_async(engine_agents.agent_create)(
                owner_name=self._owner_name(),
                name=frame["name"],
                system_prompt=frame.get("system_prompt"),
                model=frame.get("model"),
                settings=frame.get("settings"),
                author=client_author(self._owner_name()),
            )
        except services.AgentExists as exc:
            raise FrameError("agent_exists", str(exc), request_id) from None
        state = await database_sync_to_async(agent_selectors.agent_public_state)(agent=agent)
        await self._send({"type": "agent.created", "agent": state}, request_id)

    async def on_agent_get(self, frame: dict, request_id: Any) -> None:
        agent = await self.agent_of_client(frame["name"], request_id)
        state = await database_sync_to_async(agent_selectors.agent_public_state)(agent=agent)
        await self._send({"type": "agent.state", "agent": state}, request_id)

    async def agent_of_client(self, name: Any, request_id: Any) -> Agent:
        """The client's agent `name` (another owner's is not found either)."""
        try:
            return await database_sync_to_async(agent_selectors.agent_get)(
                owner_name=self._owner_name(), name=name
            )
        except agent_selectors.AgentNotFound:
            raise FrameError("agent_not_found", AGENT_NOT_FOUND.format(name=name), request_id) from None

    async def on_session_end(self, frame: dict, request_id: Any) -> None:
        """End the session (the attached one unless `session_id` names another of this
        token's): the event `session.ended` answers it, on the session's stream."""
        if frame.get("session_id") is not None:
            session = await self._session_for_token(frame["session_id"], request_id)
            session_id = session.pk
        else:
            session_id = self._attached(request_id)
        ended = await engine_agents.session_end(session_id=session_id, reason="client")
        if session_id in ended:
            return  # `session.ended` is on its way, on the session's stream
        status = await AgentSession.objects.filter(pk=session_id).values_list("status", flat=True).afirst()
        if status == SessionStatus.ENDED:
            await self._send_error("session_ended", "this session has ended already", request_id)
        else:
            await self._send_error(
                "turn_in_progress",
                "the session's turn did not stop in time: it will take no more messages; send "
                "session.end again to end it",
                request_id,
            )
