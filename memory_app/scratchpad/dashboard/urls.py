"""The scratchpad's dashboard URLs (`FeatureDashboard.urls`): included at the dashboard's root,
so their names join `dashboard:`."""

from __future__ import annotations

from django.urls import path

from memory_app.scratchpad.dashboard import views

urlpatterns = [
    path(
        "sessions/<uuid:session_id>/scratchpad/<str:space>/edit/",
        views.scratchpad_edit,
        name="scratchpad_edit",
    ),
    path(
        "sessions/<uuid:session_id>/scratchpad/<str:space>/history/",
        views.scratchpad_history,
        name="scratchpad_history",
    ),
    path(
        "sessions/<uuid:session_id>/scratchpad/<str:space>/history/<int:version>/restore/",
        views.scratchpad_restore,
        name="scratchpad_restore",
    ),
]
