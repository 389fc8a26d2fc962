from __future__ import annotations

import hmac

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from sessions_app.dashboard.auth import is_operator
from sessions_app.metrics_export import metrics_exposition


@require_safe  # GET and HEAD: load balancers probe with either
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


def _metrics_token_ok(header: str) -> bool:
    """Whether `header` (an Authorization header) carries the configured metrics token; compared
    in constant time. False when no token is configured."""
    token = settings.PALIMPSEST_METRICS_TOKEN
    scheme, _, given = header.partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus's scrape (docs/deploy.md, "Metrics"): for `Authorization: Bearer
    <PALIMPSEST_METRICS_TOKEN>` or a staff login. A wrong or missing token (and no staff login)
    is 401; a login that is not staff is 403."""
    header = request.headers.get("Authorization", "")
    if header:
        allowed = _metrics_token_ok(header)
    else:
        allowed = is_operator(request.user)
        if not allowed and request.user.is_authenticated:
            return HttpResponse("Staff only.\n", status=403, content_type="text/plain")
    if not allowed:
        response = HttpResponse("Authentication required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics_exposition()
    return HttpResponse(body, content_type=content_type)
