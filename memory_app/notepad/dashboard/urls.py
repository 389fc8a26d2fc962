"""The notepad's dashboard URLs (`FeatureDashboard.urls`): included at the dashboard's root, so
their names join `dashboard:`."""

from __future__ import annotations

from django.urls import path

from memory_app.notepad.dashboard import views

urlpatterns = [
    path("sessions/<uuid:session_id>/notepad/", views.notepad_panel, name="notepad"),
    path("sessions/<uuid:session_id>/notepad/edit/", views.notepad_edit, name="notepad_edit"),
    path(
        "sessions/<uuid:session_id>/notepad/versions/<int:version>/",
        views.notepad_revision,
        name="notepad_revision",
    ),
    path("sessions/<uuid:session_id>/notepad/history/", views.notepad_history, name="notepad_history"),
    path(
        "sessions/<uuid:session_id>/notepad/history/<int:version>/restore/",
        views.notepad_restore,
        name="notepad_restore",
    ),
]
