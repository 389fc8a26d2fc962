"""A request to the API with a body too large to read is answered before anything reads it, as
the API answers every error: `{"code": "too_large", "message"}`, 413. The limit is Django's
`DATA_UPLOAD_MAX_MEMORY_SIZE`; for a session's import `PALIMPSEST_IMPORT_MAX_BYTES` (the view
counts a body sent without a length itself); for the skills' zip import the zip's own limit
plus room for the multipart framing (the view checks the file's size itself). It reads nothing of the body.
Listed in MIDDLEWARE before the dashboard's `RequestTooLargeMiddleware`, which leaves the API's
paths to it."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from sessions_app.agent_skill_files import SKILL_ZIP_MAX_BYTES

API_PREFIX = "/api/"
ZIP_IMPORT_SUFFIX = "/skills.zip"
# A session export document (docs/export.md): `PALIMPSEST_IMPORT_MAX_BYTES`.
SESSION_IMPORT_SUFFIX = "/sessions/import"
UPLOAD_OVERHEAD_BYTES = 64 * 1024


def _body_size(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def api_body_limit(request: HttpRequest) -> int | None:
    """The largest body the API takes on this request's path (None: no limit)."""
    if request.method == "POST" and request.path_info.endswith(SESSION_IMPORT_SUFFIX):
        return settings.PALIMPSEST_IMPORT_MAX_BYTES
    if request.method == "POST" and request.path_info.endswith(ZIP_IMPORT_SUFFIX):
        return SKILL_ZIP_MAX_BYTES + UPLOAD_OVERHEAD_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        limit = api_body_limit(request)
        size = _body_size(request)
        if limit is not None and size > limit:
            return JsonResponse(
                {
                    "code": "too_large",
                    "message": (
                        f"the body is {size:,} bytes; this path takes at most {limit:,}. Nothing was stored."
                    ),
                },
                status=413,
            )
        return self.get_response(request)
