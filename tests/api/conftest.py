"""The HTTP API's fixtures: clients (a token each; tokens of one name are one client) that call
the API through Django's async test client, and sessions and agents made for them through the
engine, as the websocket makes them."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from sessions_app import services
from sessions_app.authors import client_author
from sessions_app.engine import agents as engine_agents
from sessions_app.engine import sessions as engine_sessions
from sessions_app.models import Agent, AgentSession, AgentToken

BASE = "/api/v1"


@dataclass
class ApiClient:
    """One client of the API: its token's row and raw value, and calls with its bearer token."""

    token: AgentToken
    raw: str

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.raw}"}

    async def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        client = AsyncClient()
        kwargs: dict[str, Any] = {"headers": self._headers(), **extra}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return await getattr(client, method)(BASE + path, **kwargs)

    async def get(self, path: str, **extra: Any) -> Any:
        return await self.call("get", path, **extra)

    async def post(self, path: str, body: Any = None, **extra: Any) -> Any:
        return await self.call("post", path, body, **extra)

    async def patch(self, path: str, body: Any = None) -> Any:
        return await self.call("patch", path, body)

    async def put(self, path: str, body: Any = None) -> Any:
        return await self.call("put", path, body)

    async def delete(self, path: str) -> Any:
        return await self.call("delete", path)

    async def session(self, **fields: Any) -> AgentSession:
        """A new session of this client, made as `session.create` makes one."""
        agent_name = fields.pop("agent", None)
        agent = (
            await sync_to_async(Agent.objects.get)(owner_name=self.token.name, name=agent_name)
            if agent_name
            else None
        )
        return await sync_to_async(engine_sessions.session_create)(owner=self.token, agent=agent, **fields)

    async def agent(self, name: str, **fields: Any) -> Agent:
        return await sync_to_async(engine_agents.agent_create)(
            owner_name=self.token.name, name=name, author=client_author(self.token.name), **fields
        )


@pytest.fixture
def api_client(transactional_db: Any) -> Any:
    """`await api_client(name=None)` → an `ApiClient` with a new token (another client's unless
    `name` names an earlier one's)."""
    made = itertools.count(1)

    async def make(name: str | None = None) -> ApiClient:
        token, raw = await sync_to_async(services.agent_token_create)(name=name or f"api-client-{next(made)}")
        return ApiClient(token, raw)

    return make


def body(response: Any) -> Any:
    return json.loads(response.content)


def error(response: Any) -> tuple[int, str]:
    """A refused request's status and code (and its body has exactly `code` and `message`)."""
    data = body(response)
    assert set(data) == {"code", "message"} and data["message"], data
    return response.status_code, data["code"]
