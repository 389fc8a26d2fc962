from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from sessions_app.api.app import api, api_not_found

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico where a page names no icon (a JSON response, say).
    path("favicon.ico", RedirectView.as_view(url=static("dashboard/favicon.svg"))),
    path("accounts/", include("django.contrib.auth.urls")),
    # The HTTP API (PROTOCOL.md, "HTTP API v1"): JSON, bearer tokens, OpenAPI at api/v1/openapi.json.
    path("api/v1/", api.urls),
    re_path(r"^api/", api_not_found),
    path("", include("sessions_app.urls")),
    # The operator dashboard: `/` lists the sessions, `/sessions/<uuid>/` shows one.
    path("", include("sessions_app.dashboard.urls")),
]
