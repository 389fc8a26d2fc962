"""`/api/v1/agents...`: a client's agents (PROTOCOL.md, "HTTP API v1"): list, create, get, update
(instructions as a new version, model, settings), delete, and the versions of the instructions
and the learned text. An agent is found by name among the client's own (by its token's name, as
the websocket's `agent.get`): another client's is not found either."""

from __future__ import annotations

from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from sessions_app import agent_selectors, listing_selectors, services
from sessions_app.api.auth import request_token
from sessions_app.api.errors import conflict, invalid, not_found, spec_error
from sessions_app.api.paging import CURSOR, LIMIT, POSITION_MAX, cursor_decode, cursor_encode
from sessions_app.api.schemas import AgentCreate, AgentOut, AgentPage, AgentPatch, Error, VersionPage
from sessions_app.authors import client_author
from sessions_app.common.db import db
from sessions_app.engine import agents as engine_agents
from sessions_app.models import Agent
from sessions_app.validation import SpecError

router = Router(tags=["agents"])
ERRORS: dict[int, type] = {400: Error, 401: Error, 404: Error}
AGENT_NOT_FOUND = "no agent named {name!r} (agents are the client's own: create it with POST /api/v1/agents)"


async def client_agent(request: HttpRequest, name: str) -> Agent:
    """The client's agent `name`; 404 otherwise (another client's included)."""
    try:
        return await db(agent_selectors.agent_get)(owner_name=request_token(request).name, name=name)
    except agent_selectors.AgentNotFound:
        raise not_found("agent_not_found", AGENT_NOT_FOUND.format(name=name)) from None


@router.get("/agents", response={200: AgentPage, **ERRORS}, summary="The client's agents, by name")
async def agents_list(request: HttpRequest, limit: int = LIMIT, cursor: str | None = CURSOR) -> dict:
    page = await db(listing_selectors.agents_of_client)(
        owner_name=request_token(request).name, limit=limit, after=cursor_decode(cursor, str)
    )
    items = [await db(agent_selectors.agent_public_state)(agent=agent) for agent in page.items]
    return {"items": items, "next": cursor_encode(page.items[-1].name) if page.more and page.items else None}


@router.post("/agents", response={201: AgentOut, **ERRORS, 409: Error}, summary="Create an agent")
async def agent_create(request: HttpRequest, body: AgentCreate) -> Status:
    owner = request_token(request).name
    try:
        agent = await db(engine_agents.agent_create)(
            owner_name=owner,
            name=body.name,
            system_prompt=body.system_prompt,
            model=body.model,
            settings=body.settings,
            author=client_author(owner),
        )
    except SpecError as exc:
        raise spec_error(exc) from None
    except services.AgentExists as exc:
        raise conflict("agent_exists", str(exc)) from None
    return Status(201, await db(agent_selectors.agent_public_state)(agent=agent))


@router.get("/agents/{name}", response={200: AgentOut, **ERRORS}, summary="One agent's state")
async def agent_get(request: HttpRequest, name: str) -> dict:
    agent = await client_agent(request, name)
    return await db(agent_selectors.agent_public_state)(agent=agent)


@router.patch(
    "/agents/{name}",
    response={200: AgentOut, **ERRORS},
    summary="Update an agent's instructions (a new version), model or settings (all or nothing)",
)
async def agent_patch(request: HttpRequest, name: str, body: AgentPatch) -> dict:
    agent = await client_agent(request, name)
    try:
        updated = await db(engine_agents.agent_update)(
            agent_id=agent.pk,
            system_prompt=body.system_prompt,
            model=body.model,
            settings=body.settings,
            author=client_author(request_token(request).name),
        )
    except SpecError as exc:
        raise spec_error(exc) from None
    except Agent.DoesNotExist:
        raise not_found("agent_not_found", AGENT_NOT_FOUND.format(name=name)) from None
    return await db(agent_selectors.agent_public_state)(agent=updated)


@router.delete(
    "/agents/{name}",
    response={204: None, **ERRORS, 409: Error},
    summary="Delete an agent with all its sessions (409 while a turn runs in one)",
)
async def agent_delete(request: HttpRequest, name: str) -> HttpResponse:
    agent = await client_agent(request, name)
    try:
        await db(engine_agents.agent_delete)(agent_id=agent.pk)
    except services.TurnInProgress:
        raise conflict(
            "turn_in_progress",
            "a turn is running in a session of this agent: wait for it to end, or end the session "
            "first (POST /api/v1/sessions/{id}/end); nothing was deleted",
        ) from None
    except ProtectedError:
        raise conflict(
            "agent_in_use", "a session of this agent was created meanwhile; nothing was deleted: try again"
        ) from None
    except Agent.DoesNotExist:
        raise not_found("agent_not_found", AGENT_NOT_FOUND.format(name=name)) from None
    return HttpResponse(status=204)


@router.get(
    "/agents/{name}/versions",
    response={200: VersionPage, **ERRORS},
    summary="The versions of the agent's instructions or learned text, newest first",
)
async def agent_versions(
    request: HttpRequest,
    name: str,
    part: str = Query("instructions", description="instructions or learned"),
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
) -> dict:
    if part not in listing_selectors.TEXT_PARTS:
        raise invalid(f"part: must be one of {', '.join(listing_selectors.TEXT_PARTS)}")
    agent = await client_agent(request, name)
    before = cursor_decode(cursor, int)
    if before is not None and not 0 <= before <= POSITION_MAX:
        raise invalid("cursor: not a cursor this list gave; start again without one")
    page = await db(listing_selectors.agent_text_versions)(
        agent_id=agent.pk, part=part, limit=limit, before=before
    )
    items = [
        {
            "version": v.version,
            "content": v.content,
            "author": v.author,
            "created_at": v.created_at.isoformat(),
            "restored_from": v.restored_from,
        }
        for v in page.items
    ]
    return {
        "items": items,
        "next": cursor_encode(page.items[-1].version) if page.more and page.items else None,
    }
