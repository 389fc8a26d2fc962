"""Property-based requests against the API's own OpenAPI document (schemathesis, in process over
WSGI): for every operation, generated requests (valid and not) never get a 5xx, and every answer
matches the document (status code, content type, body schema). The client's generated requests
are aimed, in turn, at its own session and agent, at another client's, and at what the generator
made up: another client's data never appears in any answer, and is still there, unchanged, after.

Bounded: MAX_EXAMPLES per operation, no shrinking past the first failure's report, a deadline per
example."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from asgiref.sync import async_to_sync
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sessions_app.models import Agent, AgentSession
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = 25
DEADLINE_MS = 5_000
# What the other client stores (never in any request of this client), and its agent's name
# (which a request may name, and a 404 may repeat).
OTHER_SECRET = "other-clients-secret-7f3a"
OTHER_AGENT = "other-agent"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@dataclass
class World:
    mine: ApiClient
    my_session: str
    other_session: str
    other_agent: str


@pytest.fixture
def world(api_client: Any) -> World:
    async def build() -> World:
        mine, other = await api_client("schemathesis-me"), await api_client("schemathesis-other")
        await mine.agent("mine", system_prompt="my instructions")
        my_session = await mine.session(title="my session", agent="mine")
        await other.agent(OTHER_AGENT, system_prompt=OTHER_SECRET)
        other_session = await other.session(title=OTHER_SECRET, agent=OTHER_AGENT)
        await other.put(f"/agents/{OTHER_AGENT}/state/{OTHER_SECRET}", {"value": OTHER_SECRET})
        await other.put(
            f"/agents/{OTHER_AGENT}/skills/secret", {"description": OTHER_SECRET, "content": OTHER_SECRET}
        )
        return World(mine, str(my_session.pk), str(other_session.pk), OTHER_AGENT)

    return async_to_sync(build)()


# Loaded when the module is collected: the document needs no token and no database.
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", WSGIHandler())


def _aim(case: Any, world: World) -> str:
    """Point the case's path at the client's own objects, another client's, or leave the
    generated values; returns which."""
    params = case.path_parameters or {}
    # By the parameters' own bytes, so a failing case is aimed the same way when it is replayed.
    choice = zlib.crc32(json.dumps(params, sort_keys=True, default=str).encode()) % 3
    if choice == 0 or not params:
        return "generated"
    target = "mine" if choice == 1 else "other"
    if "session_id" in params:
        params["session_id"] = world.my_session if target == "mine" else world.other_session
    if "name" in params:
        params["name"] = "mine" if target == "mine" else world.other_agent
    return target


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=DEADLINE_MS,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    # No example database on disk: each run draws afresh, and leaves no files behind.
    database=None,
)
def test_generated_requests_get_no_5xx_and_match_the_document(case: Any, world: World) -> None:
    target = _aim(case, world)
    response = case.call_and_validate(headers={"Authorization": f"Bearer {world.mine.raw}"}, checks=CHECKS)
    assert OTHER_SECRET not in response.text
    assert world.other_session not in response.text
    if target == "other":
        # Refused whatever else the generator did to the request (its headers, its method).
        assert response.status_code in (400, 401, 404, 405, 413), response.text


def test_the_other_clients_data_survives_the_generated_requests(world: World) -> None:
    """Run after the property test in this module's order; also holds on its own."""
    assert AgentSession.objects.filter(pk=world.other_session, title=OTHER_SECRET).exists()
    agent = Agent.objects.get(name=OTHER_AGENT)
    assert agent.instructions == OTHER_SECRET and agent.state.filter(value=OTHER_SECRET).exists()
    assert agent.skills.filter(content=OTHER_SECRET).exists()
