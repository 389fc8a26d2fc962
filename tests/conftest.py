"""Shared fixtures: agent tokens, websocket clients, the fake model APIs (Messages, Chat Completions)."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.db import connection

from sessions_app import services
from sessions_app.engine import repair, runner
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_openai import FakeOpenAIServer

(Path(__file__).resolve().parent.parent / ".local").mkdir(exist_ok=True)


@pytest.fixture(autouse=True)
def _fast_engine(settings: Any) -> None:
    settings.PALIMPSEST_POLL_SECONDS = 0.05
    settings.PALIMPSEST_OBSERVATIONS_GC_SECONDS = 0.0  # every turn's start
    settings.PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS = 0.0
    settings.PALIMPSEST_COMPACTION_RETRY_SECONDS = 0.01
    settings.PALIMPSEST_MODEL_STREAM_RETRY_SECONDS = 0.01
    settings.PALIMPSEST_PROVIDER = "scripted"


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer holds asyncio queues; each test runs in its own event loop.
    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


@pytest.fixture(scope="session", autouse=True)
def _db_threads_closed(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """The engine's database threads, and Django's one shared thread (`sync_to_async`'s), close
    their connections before the test database is dropped (set up after it, so torn down before
    it): PostgreSQL does not drop a database with sessions open."""
    yield
    import asyncio

    from django.db import connections

    from sessions_app.common.db import db_threads_close

    with django_db_blocker.unblock():
        db_threads_close()
        asyncio.run(sync_to_async(connections.close_all)())


@pytest.fixture(autouse=True)
def _no_request_parts_remembered() -> Iterator[None]:
    """Each test's database is emptied after it: a part stored in one test is not in the next."""
    from sessions_app.services import steps

    steps._parts_stored.clear()
    yield
    steps._parts_stored.clear()


@pytest.fixture(autouse=True)
def _no_connections_left() -> Iterator[None]:
    """A client a test left open must not be re-checked in the next test's event loop."""
    from sessions_app.agent_ws import connections

    yield
    connections._by_token.clear()
    from sessions_app.agent_ws import quotas

    quotas.quotas_reset()


@pytest.fixture(autouse=True)
async def _turns_finish() -> AsyncIterator[None]:
    """No turn may outlive its test (it would write into the next test's database)."""
    yield
    await repair.sweeper_stop()
    await runner.turns_wait_idle(timeout=10)


@pytest.fixture
def fake_anthropic(settings: Any) -> Iterator[FakeAnthropicServer]:
    """The fake Messages API, with the service pointed at it through the real SDK."""
    with FakeAnthropicServer() as server:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.url
        yield server


@pytest.fixture
def strict_fake(settings: Any) -> Iterator[Callable[..., FakeAnthropicServer]]:
    """`strict_fake(window=...)` → a started fake Messages API in strict mode (it refuses what
    the real API refuses, and prompts over `window`), the provider pointed at it."""
    servers: list[FakeAnthropicServer] = []

    def start(window: int = 200_000) -> FakeAnthropicServer:
        server = FakeAnthropicServer(strict=True, window=window).start()
        servers.append(server)
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.url
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def fake_openai(settings: Any) -> Iterator[FakeOpenAIServer]:
    """The fake Chat Completions API, with the service pointed at it through the real SDK."""
    with FakeOpenAIServer() as server:
        settings.PALIMPSEST_PROVIDER = "openai"
        settings.OPENAI_API_KEY = "test-key"
        settings.OPENAI_BASE_URL = server.url
        yield server


@dataclass
class ModelServer:
    """A provider's fake API, started, with the service pointed at it: `model` is a model that
    provider answers (its name in the built-in table)."""

    provider: str
    fake: FakeAnthropicServer  # or its Chat Completions sibling, FakeOpenAIServer
    model: str


PROVIDER_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}


def model_server_start(settings: Any, provider: str, **options: Any) -> ModelServer:
    """A started fake of `provider`'s API (`options` as the fakes take them: strict, window, ...)
    with the service's settings pointed at it (its model the default model too)."""
    if provider == "openai":
        fake: FakeAnthropicServer = FakeOpenAIServer(**options).start()
        settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL = "test-key", fake.url
    else:
        fake = FakeAnthropicServer(**options).start()
        settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "test-key", fake.url
    settings.PALIMPSEST_PROVIDER = provider
    settings.PALIMPSEST_DEFAULT_MODEL = PROVIDER_MODELS[provider]
    return ModelServer(provider, fake, PROVIDER_MODELS[provider])


class ModelServers:
    """`model_servers(strict=True, window=...)` → a started `ModelServer` of the provider this
    run of the test is for; `provider` and `model` say which before one is started."""

    def __init__(self, settings: Any, provider: str) -> None:
        self.settings, self.provider, self.model = settings, provider, PROVIDER_MODELS[provider]
        self.started: list[ModelServer] = []

    def __call__(self, **options: Any) -> ModelServer:
        server = model_server_start(self.settings, self.provider, **options)
        self.started.append(server)
        return server


@pytest.fixture(params=sorted(PROVIDER_MODELS))
def model_servers(request: Any, settings: Any) -> Iterator[ModelServers]:
    """The engine's scenarios on every provider: the test runs once per provider, and starts
    that provider's fake API (with the service pointed at it) by calling this."""
    servers = ModelServers(settings, request.param)
    yield servers
    for server in servers.started:
        server.fake.stop()


async def chat(client: Any, content: str) -> list[dict]:
    """Send a user message on a test client; the frames up to its turn.completed."""
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed", timeout=30)


@pytest.fixture
def make_token(transactional_db: Any) -> Any:
    """`await make_token(name=None)` → a new raw token. Sessions and agents belong to the client,
    known by its token's name: each token made without a name is another client's; tokens of one
    name are one client's."""
    made = itertools.count(1)

    async def make(name: str | None = None) -> str:
        _, raw = await sync_to_async(services.agent_token_create)(name=name or f"client-{next(made)}")
        return raw

    return make


async def alist(queryset: Any) -> list:
    """Evaluate a queryset from async test code."""
    return await sync_to_async(lambda: list(queryset))()


class Client:
    """A websocket agent client over Channels' communicator, with small protocol helpers."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.ws = communicator

    async def send(self, frame: dict | str) -> None:
        await self.ws.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 5) -> dict:
        return json.loads(await self.ws.receive_from(timeout=timeout))

    async def until(self, frame_type: str, timeout: float = 5) -> list[dict]:
        """Receive frames up to and including the first of `frame_type`; returns them all."""
        frames = []
        while True:
            frame = await self.recv(timeout)
            frames.append(frame)
            if frame["type"] == frame_type:
                return frames

    async def create(self, **fields: Any) -> dict:
        await self.send({"type": "session.create", **fields})
        reply = await self.recv()
        assert reply["type"] == "session.created", reply
        return reply["session"]

    async def nothing_more(self) -> bool:
        return await self.ws.receive_nothing(timeout=0.2)

    async def close(self) -> None:
        await self.ws.disconnect()


@pytest.fixture
def connect(make_token: Any) -> Any:
    """`await connect(token=None)` → a connected Client (a fresh token unless one is given)."""
    from config.asgi import application

    opened: list[Client] = []

    async def open_client(
        token: str | None = None, *, headers: list | None = None, path: str = "/ws/agent/"
    ) -> Client:
        raw = token if token is not None else await make_token()
        communicator = WebsocketCommunicator(
            application,
            path,
            headers=headers if headers is not None else [(b"authorization", f"Bearer {raw}".encode())],
        )
        connected, _ = await communicator.connect()
        assert connected
        client = Client(communicator)
        opened.append(client)
        return client

    return open_client


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def vendor(request: Any) -> str:
    """Each test on SQLite (the default run) and on PostgreSQL (the `services` run)."""
    if connection.vendor != request.param:
        pytest.skip(f"runs on {request.param}; this run's database is {connection.vendor}")
    return request.param
