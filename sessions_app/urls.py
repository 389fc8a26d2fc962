from __future__ import annotations

from django.urls import path

from sessions_app import views

app_name = "sessions_app"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    # Prometheus (docs/deploy.md, "Metrics"): staff, or the metrics token.
    path("metrics", views.metrics, name="metrics"),
]
