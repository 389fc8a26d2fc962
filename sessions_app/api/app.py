"""The `NinjaAPI` of `/api/v1/` (PROTOCOL.md, "HTTP API v1"): every path needs a bearer token but
the OpenAPI document (`/api/v1/openapi.json`) and the interactive docs (`/api/v1/docs`), which
Swagger UI renders from django-ninja's own static files (`ninja` in INSTALLED_APPS), never a CDN.

The views are async: the service runs under daphne, `POST .../end` waits for a running turn to
stop in this process's event loop (`engine.agents.session_end`), and every database call goes
through the engine's database threads (`common.db.db`), so a request never holds the loop."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from ninja import NinjaAPI
from ninja.openapi.docs import Swagger

from sessions_app.api import agents, knowledge, sessions, transfer
from sessions_app.api.auth import TokenAuth
from sessions_app.api.errors import error_handlers_install

API_DESCRIPTION = (
    'Palimpsest\'s HTTP API (PROTOCOL.md, "HTTP API v1"; docs/api.md). Authenticate with '
    '`Authorization: Bearer TOKEN` (the agent websocket\'s tokens). Errors are `{"code", "message"}`; '
    'lists are `{"items", "next"}` with `?limit=` (at most 100) and `?cursor=`.'
)


def api_build() -> NinjaAPI:
    """The API with its routers and error handlers (built once, by `api` below: django-ninja
    refuses two APIs of one URL namespace)."""
    built = NinjaAPI(
        title="Palimpsest",
        version="1",
        description=API_DESCRIPTION,
        urls_namespace="api",
        auth=TokenAuth(),
        docs=Swagger(),
        docs_url="/docs",
        openapi_url="/openapi.json",
    )
    error_handlers_install(built)
    built.add_router("", transfer.router)
    built.add_router("", sessions.router)
    built.add_router("", agents.router)
    built.add_router("", knowledge.router)
    return built


api = api_build()


def api_not_found(request: HttpRequest) -> JsonResponse:
    """A path under the API that names no operation (`config/urls.py`, after the API's own)."""
    return JsonResponse(
        {
            "code": "not_found",
            "message": "no such path in the HTTP API (GET /api/v1/openapi.json lists them)",
        },
        status=404,
    )
