"""`GET /api/v1/sessions/{id}/export` and `POST /api/v1/sessions/import` (PROTOCOL.md, "HTTP API
v1"; docs/export.md): the document streamed out, imported as a new session of the importing
client; another client's session is not found; a bad document is a 400 naming what is wrong (a
413 when too large) and nothing is written."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps

from sessions_app.models import Agent, AgentSession, AgentSkill, Message
from tests.api.conftest import body, error
from tests.sessions_app.transfer_support import chat

pytestmark = pytest.mark.django_db(transaction=True)


async def _streamed(response: Any) -> bytes:
    assert response.streaming
    parts = []
    async for part in response.streaming_content:
        parts.append(part)
    return b"".join(parts)


async def _ran(connect: Any, raw: str, **fields: Any) -> str:
    """A session of the client run by the scripted model: a notepad line and a plan."""
    client = await connect(raw)
    session = await client.create(**fields)
    await chat(client, "remember: the Q3 gap is in EMEA")
    await chat(client, "plan: read; check")
    await client.close()
    return session["id"]


async def _document(client: Any, session_id: str) -> dict:
    response = await client.get(f"/sessions/{session_id}/export")
    assert response.status_code == 200, response
    assert response["Content-Type"] == "application/json"
    assert f'filename="session-{session_id}.json"' in response["Content-Disposition"]
    return json.loads(await _streamed(response))


async def _import(client: Any, document: Any, **extra: Any) -> Any:
    data = document if isinstance(document, bytes | str) else json.dumps(document)
    return await client.call("post", "/sessions/import", data=data, content_type="application/json", **extra)


def _row_counts() -> dict[str, int]:
    """Rows of every table of the project's apps (a refused import writes none)."""
    counts = {}
    for label in ("sessions_app", "memory_app"):
        for model in apps.get_app_config(label).get_models():
            counts[model.__name__] = model._default_manager.count()
    return counts


async def test_export_then_import_makes_a_session_of_the_importer(api_client: Any, connect: Any) -> None:
    exporter, importer = await api_client(), await api_client()
    session_id = await _ran(connect, exporter.raw, title="Q3 audit")
    document = await _document(exporter, session_id)
    assert document["format"] == "palimpsest.session/1"
    assert document["session"]["session"]["notepad"] == "the Q3 gap is in EMEA\n"
    assert document["session"]["features"]["scratchpad"]["pad"]["plan"].startswith("1. read")

    response = await _import(importer, document)
    assert response.status_code == 201, response.content
    state = body(response)
    assert state["id"] != session_id and state["title"] == "Q3 audit" and state["status"] == "idle"
    imported = await sync_to_async(AgentSession.objects.select_related("owner").get)(pk=state["id"])
    assert imported.owner_id == importer.token.pk and imported.notepad == "the Q3 gap is in EMEA\n"
    # The importer reads it; the exporter does not see it (nor the importer the original).
    assert (await importer.get(f"/sessions/{state['id']}")).status_code == 200
    assert error(await exporter.get(f"/sessions/{state['id']}/export")) == (404, "session_not_found")
    assert error(await importer.get(f"/sessions/{session_id}/export")) == (404, "session_not_found")


async def test_an_agent_named_is_the_importers_or_made_from_the_documents_copy(
    api_client: Any, connect: Any
) -> None:
    exporter = await api_client()
    await exporter.agent("auditor", system_prompt="You audit ledgers.")

    def skill() -> None:
        agent = Agent.objects.get(owner_name=exporter.token.name, name="auditor")
        AgentSkill.objects.create(agent=agent, name="vat-check", description="Check VAT lines.", version=1)

    await sync_to_async(skill)()
    session_id = await _ran(connect, exporter.raw, agent="auditor")
    document = await _document(exporter, session_id)
    assert [a["name"] for a in document["agents"]] == ["auditor"]

    newcomer = await api_client()
    response = await _import(newcomer, document)
    assert response.status_code == 201, response.content
    made = await sync_to_async(Agent.objects.get)(owner_name=newcomer.token.name, name="auditor")
    assert made.instructions == "You audit ledgers."
    assert await sync_to_async(lambda: list(made.skills.values_list("name", flat=True)))() == ["vat-check"]
    assert body(response)["agent"] == "auditor"

    # An importer with an agent of that name keeps its own: the session becomes its agent's.
    keeper = await api_client()
    own = await keeper.agent("auditor", system_prompt="My own auditor.")
    response = await _import(keeper, document)
    assert response.status_code == 201
    imported = await sync_to_async(AgentSession.objects.get)(pk=body(response)["id"])
    assert imported.agent_id == own.pk
    assert await sync_to_async(Agent.objects.get)(pk=own.pk) == own
    assert (await sync_to_async(Agent.objects.get)(pk=own.pk)).instructions == "My own auditor."


def _without(data: dict, *path: Any) -> dict:
    changed = copy.deepcopy(data)
    target = changed
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return changed


def _with(data: dict, value: Any, *path: Any) -> dict:
    changed = copy.deepcopy(data)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


async def test_bad_documents_are_refused_naming_what_is_wrong_and_nothing_is_written(
    api_client: Any, connect: Any
) -> None:
    client = await api_client()
    await client.agent("auditor")
    document = await _document(client, await _ran(connect, client.raw, agent="auditor"))
    importer = await api_client()
    cases: list[tuple[Any, str]] = [
        (b"{not json", "not JSON"),
        ([1, 2], "must be a JSON object"),
        ({"hello": 1}, "format: is missing"),
        (_with(document, "other.thing/1", "format"), "format: 'other.thing/1' is not a Palimpsest"),
        (_with(document, "palimpsest.session/9", "format"), "format: version '9' is not supported"),
        (_without(document, "session", "session", "model"), "session.session.model: is missing"),
        (_without(document, "session", "messages"), "session.messages: is missing"),
        (
            _with(document, "text", "session", "messages", 1, "content"),
            "session.messages[1].content: must be a list",
        ),
        (
            _with(document, [{"text": "no type"}], "session", "messages", 1, "content"),
            "session.messages[1].content: must be a list of content blocks",
        ),
        (
            _with(document, "7", "session", "messages", 2, "position"),
            "session.messages[2].position: must be an integer",
        ),
        (
            _with(document, "soon", "session", "turns", 0, "started_at"),
            "session.turns[0].started_at: must be an ISO",
        ),
        (
            _with(document, "one", "session", "features", "notepad", "revisions", 0, "version"),
            "session.features.notepad: revisions[0].version: must be an integer",
        ),
        (
            _with(document, "Bad Name!", "session", "session", "agent"),
            "session.session.agent: an agent name is",
        ),
        (_with(document, [], "agents"), "agents: the document names the agent 'auditor' but holds no copy"),
        (
            _with(document, "running?", "session", "session", "status"),
            "session.session.status: must be one of",
        ),
        (_with(document, [{"name": "Bad!", "description": "x"}], "agents", 0, "skills"), "agents[0]: "),
        (_with(document, "Bad Name!", "agents", 0, "name"), "agents: the document names the agent 'auditor'"),
        (
            _with(document, {"notepad": {"enabled": "yes"}}, "session", "session", "settings"),
            "session.session: settings.notepad.enabled must be true or false",
        ),
        (
            _with(document, 2**40, "session", "session", "context_window"),
            "session.session: context_window must be an integer",
        ),
        (
            _with(document, {"a\u0000": 1}, "session", "messages", 0, "metadata"),
            "session.messages[0].metadata: a key must not hold U+0000",
        ),
        (
            _with(document, "a\u0000b", "session", "events", 0, "type"),
            "session.events[0].type: must not hold",
        ),
        (
            json.dumps(document).replace('"token_ratio":', '"token_ratio":NaN,"x":', 1),
            "NaN is not a JSON number",
        ),
    ]
    before = await sync_to_async(_row_counts)()
    for bad, named in cases:
        response = await _import(importer, bad)
        assert error(response) == (400, "invalid_document"), (named, response.content)
        assert named in body(response)["message"], (named, body(response)["message"])
    assert await sync_to_async(_row_counts)() == before


async def test_a_document_over_the_limit_is_413_and_one_over_djangos_memory_limit_imports(
    api_client: Any, connect: Any, settings: Any
) -> None:
    client = await api_client()
    document = await _document(client, await _ran(connect, client.raw))
    # Over Django's in-memory limit (2.5 MB): read in pieces into a file, not refused.
    big = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)
    document["session"]["messages"][0]["metadata"]["big"] = big
    response = await _import(client, document)
    assert response.status_code == 201, response.content
    stored = await sync_to_async(
        lambda: Message.objects.filter(session_id=body(response)["id"], position=0).values_list(
            "metadata", flat=True
        )[0]
    )()
    assert stored["big"] == big

    settings.PALIMPSEST_IMPORT_MAX_BYTES = 10_000
    before = await sync_to_async(_row_counts)()
    assert error(await _import(client, document)) == (413, "too_large")
    assert await sync_to_async(_row_counts)() == before


async def test_export_of_a_missing_or_malformed_id_is_404_and_both_need_a_token(api_client: Any) -> None:
    client = await api_client()
    assert error(await client.get("/sessions/3f1c0e4e-0000-4000-8000-000000000000/export")) == (
        404,
        "session_not_found",
    )
    assert error(await client.get("/sessions/nope/export")) == (404, "session_not_found")
    from django.test import AsyncClient

    assert (await AsyncClient().get("/api/v1/sessions/nope/export")).status_code == 401
    response = await AsyncClient().post("/api/v1/sessions/import", data="{}", content_type="application/json")
    assert response.status_code == 401


async def test_an_import_counts_in_the_clients_sessions_per_minute(
    api_client: Any, connect: Any, settings: Any
) -> None:
    client = await api_client()
    document = await _document(client, await _ran(connect, client.raw))
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 2
    response = await _import(client, document)
    assert response.status_code == 201  # the session it ran, and this one
    before = await sync_to_async(_row_counts)()
    assert error(await _import(client, document)) == (429, "rate_limited")
    assert await sync_to_async(_row_counts)() == before


def test_a_body_without_a_length_is_counted_as_it_is_read(tmp_path: Any) -> None:
    """A chunked body (no Content-Length, which the middleware would have judged) is read in
    pieces into a file, and given up as soon as it passes the limit."""
    import io

    from sessions_app.api.transfer import _body_to_file

    class Body:
        def __init__(self, size: int) -> None:
            self.stream = io.BytesIO(b"x" * size)

        def read(self, n: int) -> bytes:
            return self.stream.read(n)

    path = _body_to_file(Body(3_000_000), 3_000_000)  # type: ignore[arg-type]
    assert path is not None and path.stat().st_size == 3_000_000
    path.unlink()
    assert _body_to_file(Body(3_000_001), 3_000_000) is None  # type: ignore[arg-type]
