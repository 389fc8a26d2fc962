from __future__ import annotations

from django.urls import path

from sessions_app.dashboard import subsessions, views

app_name = "dashboard"

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/new/", views.session_create, name="session_create"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session"),
    path("sessions/<uuid:session_id>/status/", views.session_status, name="status"),
    path("sessions/<uuid:session_id>/subtree/", subsessions.subtree, name="subtree"),
    path("sessions/<uuid:session_id>/transcript/", views.transcript_older, name="transcript"),
    path("sessions/<uuid:session_id>/messages/", views.message_send, name="message_send"),
    path("sessions/<uuid:session_id>/cancel/", views.turn_cancel, name="turn_cancel"),
    path("sessions/<uuid:session_id>/context/", views.context_panel, name="context"),
    path("sessions/<uuid:session_id>/timeline/", views.timeline_panel, name="timeline"),
    path("sessions/<uuid:session_id>/notepad/", views.notepad_panel, name="notepad"),
    path("sessions/<uuid:session_id>/notepad/edit/", views.notepad_edit, name="notepad_edit"),
    path(
        "sessions/<uuid:session_id>/notepad/versions/<int:version>/",
        views.notepad_revision,
        name="notepad_revision",
    ),
    path(
        "sessions/<uuid:session_id>/scratchpad/<str:space>/edit/",
        views.scratchpad_edit,
        name="scratchpad_edit",
    ),
    path("sessions/<uuid:session_id>/observations/", views.observation_list, name="observations"),
    path(
        "sessions/<uuid:session_id>/observations/<str:observation_id>/",
        views.observation_view,
        name="observation",
    ),
    path("sessions/<uuid:session_id>/archives/", views.archive_panel, name="archive"),
    path(
        "sessions/<uuid:session_id>/archives/<int:epoch>/messages/",
        views.archive_messages,
        name="archive_messages",
    ),
    path("sessions/<uuid:session_id>/inspector/", views.inspector_panel, name="inspector"),
    path(
        "sessions/<uuid:session_id>/model-calls/<int:call_id>/request.json",
        views.model_call_request_json,
        name="model_call_request",
    ),
]
