"""The API's errors: `{"code", "message"}` with a 4xx status (PROTOCOL.md, "HTTP API v1").

A view raises `ApiError`; what the layers below raise is mapped here, in one place, so that every
path answers the same misuse with the same status and code."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from sessions_app.validation import SpecError

INVALID_VALUE = "invalid_value"
UNAUTHORIZED_MESSAGE = (
    "a valid agent token is needed: send 'Authorization: Bearer TOKEN' (create_agent_token NAME makes one)"
)
# How many of a request's validation problems an error's message names.
PROBLEMS_NAMED = 3


class ApiError(Exception):
    """A request the API refuses: nothing stored changed. `status` is a 4xx."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def not_found(code: str, message: str) -> ApiError:
    return ApiError(404, code, message)


def conflict(code: str, message: str) -> ApiError:
    return ApiError(409, code, message)


def invalid(message: str, code: str = INVALID_VALUE) -> ApiError:
    return ApiError(400, code, message)


def spec_error(exc: SpecError) -> ApiError:
    """A value the engine's checks refused (`invalid_value`, `invalid_settings`, ...): 400."""
    return ApiError(400, exc.code, exc.message)


def _where(loc: Any) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "payload", "file")]
    return ".".join(parts) or "the request"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """What pydantic found wrong, by field: an unknown field says it is not taken here."""
    problems = []
    for error in errors[:PROBLEMS_NAMED]:
        where = _where(error.get("loc") or ())
        if error.get("type") == "extra_forbidden":
            problems.append(f"{where}: this path does not take this field")
        else:
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
    more = len(errors) - PROBLEMS_NAMED
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def error_handlers_install(api: NinjaAPI) -> None:
    """Every error the API answers, as `{"code", "message"}`. (Each handler gets the exception
    of its class; ninja's annotation of a handler's argument is looser, hence `Any`.)"""

    def reply(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
        return api.create_response(request, {"code": code, "message": message}, status=status)

    def on_api_error(request: HttpRequest, exc: Any) -> HttpResponse:
        return reply(request, exc.status, exc.code, exc.message)

    def on_validation(request: HttpRequest, exc: Any) -> HttpResponse:
        # ninja's 422: a field missing, of the wrong type, or not taken by the path.
        return reply(request, 400, INVALID_VALUE, validation_message(list(exc.errors)))

    def on_auth(request: HttpRequest, exc: Any) -> HttpResponse:
        return reply(request, 401, "unauthorized", UNAUTHORIZED_MESSAGE)

    def on_http(request: HttpRequest, exc: Any) -> HttpResponse:
        code = INVALID_VALUE if exc.status_code == 400 else "http_error"
        return reply(request, exc.status_code, code, str(exc))

    def on_404(request: HttpRequest, exc: Any) -> HttpResponse:
        return reply(request, 404, "not_found", "no such resource")

    def on_too_big(request: HttpRequest, exc: Any) -> HttpResponse:
        return reply(request, 413, "too_large", "the request body is too large; nothing was stored")

    api.add_exception_handler(ApiError, on_api_error)
    api.add_exception_handler(ValidationError, on_validation)
    api.add_exception_handler(AuthenticationError, on_auth)
    api.add_exception_handler(HttpError, on_http)
    api.add_exception_handler(Http404, on_404)
    api.add_exception_handler(RequestDataTooBig, on_too_big)
