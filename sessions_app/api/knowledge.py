"""`/api/v1/agents/{name}/skills...` and `.../state...`: an agent's skills (list, get, put,
delete, and all of them as a zip of `NAME/SKILL.md` folders, exported and imported) and its state
(list by prefix, get, put with `expected_version`, delete). Written as the client
(`client:<token name>`), within the agent's own `knowledge` limits, through the same services as
the model's tools and the dashboard."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import register_converter
from ninja import File, Query, Router
from ninja.files import UploadedFile

from sessions_app import agent_knowledge_selectors, listing_selectors, services
from sessions_app.agent_knowledge_rules import (
    AgentKnowledgeError,
    AgentStateConflict,
    skill_name_check,
    state_key_check,
)
from sessions_app.agent_skill_files import (
    SKILL_ZIP_MAX_BYTES,
    SkillFileError,
    skill_zip_read,
    skill_zip_write,
)
from sessions_app.api.agents import client_agent
from sessions_app.api.auth import request_token
from sessions_app.api.errors import conflict, invalid, not_found
from sessions_app.api.paging import CURSOR, LIMIT, cursor_decode, cursor_encode
from sessions_app.api.schemas import (
    Error,
    SkillOut,
    SkillPage,
    SkillPut,
    SkillsImported,
    StateOut,
    StatePage,
    StatePut,
)
from sessions_app.authors import client_author
from sessions_app.common.db import db
from sessions_app.engine.agent_limits import max_skills
from sessions_app.services import SkillFields


class StateKeyConverter:
    """A state key in a path, URL-decoded: any characters ("/" and line breaks too; a key is 1-200
    characters of anything). Django's own `path` converter stops at a line break."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


# Django's converters are named in one registry, which routes read when they are built.
register_converter(StateKeyConverter, "statekey")

router = Router(tags=["skills and state"])
ERRORS: dict[int, type] = {400: Error, 401: Error, 404: Error}
ZIP_TYPE = "application/zip"
ZIP_FILE = File(..., description="a zip of NAME/SKILL.md folders")


def _author(request: HttpRequest) -> str:
    return client_author(request_token(request).name)


def _checked(check, value: str) -> str:  # type: ignore[no-untyped-def]
    """A skill's name or a state key by its rule (`agent_knowledge_rules`), else a 400."""
    try:
        return check(value)
    except AgentKnowledgeError as exc:
        raise invalid(str(exc)) from None


# -- skills -----------------------------------------------------------------
@router.get(
    "/agents/{name}/skills", response={200: SkillPage, **ERRORS}, summary="The agent's skills, by name"
)
async def skills_list(
    request: HttpRequest, name: str, limit: int = LIMIT, cursor: str | None = CURSOR
) -> dict:
    agent = await client_agent(request, name)
    page = await db(listing_selectors.agent_skills_page)(
        agent_id=agent.pk, limit=limit, after=cursor_decode(cursor, str)
    )
    return {
        "items": page.items,
        "next": cursor_encode(page.items[-1]["name"]) if page.more and page.items else None,
    }


@router.get(
    "/agents/{name}/skills.zip",
    response={200: bytes, **ERRORS},
    summary="Every skill as a zip of NAME/SKILL.md folders",
    openapi_extra={
        "responses": {
            200: {
                "description": "a zip",
                "content": {ZIP_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            }
        }
    },
)
async def skills_export(request: HttpRequest, name: str) -> HttpResponse:
    agent = await client_agent(request, name)
    skills = await db(agent_knowledge_selectors.agent_skills_list)(agent_id=agent.pk)
    data = skill_zip_write(
        [SkillFields(name=s.name, description=s.description, content=s.content) for s in skills]
    )
    response = HttpResponse(data, content_type=ZIP_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{agent.name}-skills.zip"'
    return response


@router.post(
    "/agents/{name}/skills.zip",
    response={200: SkillsImported, **ERRORS},
    summary="Import a zip of NAME/SKILL.md folders (all or nothing)",
)
async def skills_import(request: HttpRequest, name: str, file: UploadedFile = ZIP_FILE) -> dict:
    agent = await client_agent(request, name)
    # Read one byte past the limit: a larger file is refused without reading it all.
    data = file.read(SKILL_ZIP_MAX_BYTES + 1)
    try:
        skills = skill_zip_read(data)
        rows = await db(services.agent_skills_import)(
            agent_id=agent.pk, skills=skills, author=_author(request), max_skills=max_skills(agent)
        )
    except (SkillFileError, AgentKnowledgeError) as exc:
        raise invalid(str(exc)) from None
    return {"imported": [{"name": r.name, "description": r.description, "version": r.version} for r in rows]}


@router.get("/agents/{name}/skills/{skill}", response={200: SkillOut, **ERRORS}, summary="One skill")
async def skill_get(request: HttpRequest, name: str, skill: str) -> dict:
    agent = await client_agent(request, name)
    _checked(skill_name_check, skill)
    try:
        view = await db(agent_knowledge_selectors.agent_skill_get)(agent_id=agent.pk, name=skill)
    except AgentKnowledgeError as exc:
        raise not_found("skill_not_found", str(exc)) from None
    return {
        "name": view.name,
        "description": view.description,
        "content": view.content,
        "version": view.version,
    }


@router.put(
    "/agents/{name}/skills/{skill}",
    response={200: SkillOut, **ERRORS},
    summary="Create or replace a skill (a new version)",
)
async def skill_put(request: HttpRequest, name: str, skill: str, body: SkillPut) -> dict:
    agent = await client_agent(request, name)
    try:
        row = await db(services.agent_skill_write)(
            agent_id=agent.pk,
            name=skill,
            description=body.description,
            content=body.content,
            author=_author(request),
            max_skills=max_skills(agent),
        )
    except AgentKnowledgeError as exc:
        raise invalid(str(exc)) from None
    return {"name": row.name, "description": row.description, "content": row.content, "version": row.version}


@router.delete(
    "/agents/{name}/skills/{skill}",
    response={204: None, **ERRORS},
    summary="Delete a skill (its versions are kept)",
)
async def skill_delete(request: HttpRequest, name: str, skill: str) -> HttpResponse:
    agent = await client_agent(request, name)
    _checked(skill_name_check, skill)
    try:
        await db(services.agent_skill_delete)(agent_id=agent.pk, name=skill, author=_author(request))
    except AgentKnowledgeError as exc:
        raise not_found("skill_not_found", str(exc)) from None
    return HttpResponse(status=204)


# -- state ------------------------------------------------------------------
def _entry(entry: object) -> dict:
    return {"key": entry.key, "value": entry.value, "version": entry.version}  # type: ignore[attr-defined]


@router.get(
    "/agents/{name}/state", response={200: StatePage, **ERRORS}, summary="The agent's state entries, by key"
)
async def state_list(
    request: HttpRequest,
    name: str,
    prefix: str = Query("", description="only keys that start with this (case-sensitive)"),
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
) -> dict:
    agent = await client_agent(request, name)
    page = await db(listing_selectors.agent_state_page)(
        agent_id=agent.pk, limit=limit, prefix=prefix, after=cursor_decode(cursor, str)
    )
    items = [_entry(e) for e in page.items]
    return {"items": items, "next": cursor_encode(items[-1]["key"]) if page.more and items else None}


@router.get(
    "/agents/{name}/state/{statekey:key}", response={200: StateOut, **ERRORS}, summary="One state entry"
)
async def state_get(request: HttpRequest, name: str, key: str) -> dict:
    agent = await client_agent(request, name)
    _checked(state_key_check, key)
    try:
        view = await db(agent_knowledge_selectors.agent_state_get)(agent_id=agent.pk, key=key)
    except AgentKnowledgeError as exc:
        raise not_found("key_not_found", str(exc)) from None
    return {"key": view.key, "value": view.value, "version": view.version}


@router.put(
    "/agents/{name}/state/{statekey:key}",
    response={200: StateOut, **ERRORS, 409: Error},
    summary="Set a state entry (409 when expected_version is not its version)",
)
async def state_put(request: HttpRequest, name: str, key: str, body: StatePut) -> dict:
    agent = await client_agent(request, name)
    try:
        entry = await db(services.agent_state_set)(
            agent_id=agent.pk,
            key=key,
            value=body.value,
            author=_author(request),
            expected_version=body.expected_version,
        )
    except AgentStateConflict as exc:
        raise conflict("version_conflict", str(exc)) from None
    except AgentKnowledgeError as exc:
        raise invalid(str(exc)) from None
    return _entry(entry)


@router.delete(
    "/agents/{name}/state/{statekey:key}", response={204: None, **ERRORS}, summary="Delete a state entry"
)
async def state_delete(request: HttpRequest, name: str, key: str) -> HttpResponse:
    agent = await client_agent(request, name)
    _checked(state_key_check, key)
    try:
        await db(services.agent_state_delete)(agent_id=agent.pk, key=key, author=_author(request))
    except AgentKnowledgeError as exc:
        raise not_found("key_not_found", str(exc)) from None
    return HttpResponse(status=204)
