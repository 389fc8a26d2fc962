from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("sessions_app.urls")),
    # The operator dashboard: `/` lists the sessions, `/sessions/<uuid>/` shows one.
    path("", include("sessions_app.dashboard.urls")),
]
