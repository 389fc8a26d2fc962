"""`GET /api/v1/sessions/{id}/export` and `POST /api/v1/sessions/import` (PROTOCOL.md, "HTTP API
v1"; docs/export.md): a session as one JSON document, streamed out, and a document streamed in
(into a temporary file, up to `PALIMPSEST_IMPORT_MAX_BYTES`) and imported as a new session of
the importing client."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Status

from sessions_app import services
from sessions_app.api.auth import request_token
from sessions_app.api.errors import ApiError, invalid
from sessions_app.api.schemas import Error, SessionOut
from sessions_app.api.sessions import client_session
from sessions_app.common.db import db
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine import transfer
from sessions_app.transfer_rows import DocumentError

router = Router(tags=["sessions"])
ERRORS: dict[int, type] = {400: Error, 401: Error, 404: Error}
JSON_TYPE = "application/json"
READ_BYTES = 1024 * 1024
INVALID_DOCUMENT = "invalid_document"


@router.get(
    "/sessions/{session_id}/export",
    response={200: bytes, **ERRORS},
    summary=f"The session as one JSON document ({transfer.FORMAT}), streamed",
    openapi_extra={
        "responses": {
            200: {"description": "the document", "content": {JSON_TYPE: {"schema": {"type": "object"}}}}
        }
    },
)
async def session_export(request: HttpRequest, session_id: str) -> StreamingHttpResponse:
    session = await client_session(request, session_id)
    response = StreamingHttpResponse(transfer.export_stream(session.pk), content_type=JSON_TYPE)
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.json"'
    return response


def _body_to_file(request: HttpRequest, limit: int) -> Path | None:
    """The request's body copied in pieces into a temporary file (None: over `limit` bytes)."""
    with tempfile.NamedTemporaryFile(prefix="palimpsest-import-", suffix=".json", delete=False) as file:
        path = Path(file.name)
        size = 0
        while chunk := request.read(READ_BYTES):
            size += len(chunk)
            if size > limit:
                break
            file.write(chunk)
    if size > limit:
        path.unlink(missing_ok=True)
        return None
    return path


@router.post(
    "/sessions/import",
    response={201: SessionOut, **ERRORS, 413: Error, 429: Error},
    summary="A new session of this client from an export document (all or nothing)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                JSON_TYPE: {"schema": {"type": "object", "description": f"a {transfer.FORMAT} document"}}
            },
        }
    },
)
async def session_import(request: HttpRequest) -> Status:
    token = request_token(request)
    limit = settings.PALIMPSEST_IMPORT_MAX_BYTES
    path = await asyncio.to_thread(_body_to_file, request, limit)
    if path is None:
        raise ApiError(
            413,
            "too_large",
            f"the document is over {limit:,} bytes (PALIMPSEST_IMPORT_MAX_BYTES); nothing was stored",
        )
    try:
        session = await db(transfer.session_import_file)(path, owner=token)
    except DocumentError as exc:
        raise invalid(str(exc), code=INVALID_DOCUMENT) from None
    except services.SessionQuotaExceeded as exc:
        raise ApiError(429, "rate_limited", f"{exc}; nothing was stored") from None
    finally:
        path.unlink(missing_ok=True)
    return Status(201, await db(engine_sessions.session_state)(session))
