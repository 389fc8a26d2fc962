"""A request too large to read is answered before anything reads it.

Django refuses a form body over `DATA_UPLOAD_MAX_MEMORY_SIZE` with `RequestDataTooBig` where it is
first read, which for a POST is the CSRF check: the exception becomes a bare 400 (in DEBUG, Django's
technical page) before any view runs, so no view can answer it with its form. This middleware
(before `CsrfViewMiddleware`) answers such a request first: 413, and for htmx a client event
(`TOO_LARGE_EVENT`, its message in `detail.value`) that the page shows as the form's error without
swapping anything, so what the operator typed stays in the form. It reads nothing of the body.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django_htmx.http import reswap, trigger_client_event

from sessions_app.agent_skill_files import SKILL_ZIP_MAX_BYTES

# The client event an htmx request gets (dashboard.js shows its message in the sending form).
TOO_LARGE_EVENT = "palimpsest:too-large"
MEGABYTE = 1024 * 1024
# The dashboard's one upload (a zip of skills; Django streams a file past the memory limit): its
# own limit, plus room for the form's other fields and the multipart framing. The view checks
# the file's size itself.
UPLOAD_FORM_OVERHEAD_BYTES = 64 * 1024
UPLOAD_LIMITS = {"dashboard:agent_skills_import": SKILL_ZIP_MAX_BYTES + UPLOAD_FORM_OVERHEAD_BYTES}
# The HTTP API answers its own bodies' sizes, as JSON (`sessions_app/api/middleware.py`, before this).
API_PREFIX = "/api/"


def too_large_message(size: int, limit: int) -> str:
    return (
        f"This is too large to send ({size / MEGABYTE:.1f} MB; at most {limit / MEGABYTE:.1f} MB). "
        "Nothing was sent: shorten it and send again."
    )


def _body_size(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class RequestTooLargeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        size = _body_size(request)
        # Outside the skills' import nothing here uploads files: a body over the limit is form
        # fields, which Django refuses whether urlencoded or multipart (only files are streamed).
        if limit is None or size <= limit or request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        upload_limit = _upload_limit(request)
        if upload_limit is not None:
            if size <= upload_limit:
                return self.get_response(request)
            limit = upload_limit
        message = too_large_message(size, limit)
        response = HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        if request.headers.get("HX-Request") == "true":
            response = reswap(response, "none")
            trigger_client_event(response, TOO_LARGE_EVENT, {"value": message})
        return response


def _upload_limit(request: HttpRequest) -> int | None:
    """The limit of an upload view's body (None: not one); resolved only for a large body."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return UPLOAD_LIMITS.get(match.view_name)
