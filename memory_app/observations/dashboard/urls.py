"""The observations' dashboard URLs (`FeatureDashboard.urls`): included at the dashboard's root,
so their names join `dashboard:`."""

from __future__ import annotations

from django.urls import path

from memory_app.observations.dashboard import views

urlpatterns = [
    path("sessions/<uuid:session_id>/observations/", views.observation_list, name="observations"),
    path(
        "sessions/<uuid:session_id>/observations/<str:observation_id>/",
        views.observation_view,
        name="observation",
    ),
]
