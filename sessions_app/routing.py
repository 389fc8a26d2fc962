from __future__ import annotations

from django.urls import path

from sessions_app.consumers import AgentConsumer
from sessions_app.dashboard.consumers import DashboardListConsumer, DashboardSessionConsumer

websocket_urlpatterns = [
    path("ws/agent/", AgentConsumer.as_asgi()),
    path("ws/dashboard/", DashboardListConsumer.as_asgi()),
    path("ws/dashboard/sessions/<uuid:session_id>/", DashboardSessionConsumer.as_asgi()),
]
