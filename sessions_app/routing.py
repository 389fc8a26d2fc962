"""The app's websocket URLs (Channels' layout: one `routing.py` per app): the agent websocket
(`agent_ws`) and the dashboard's two."""

from __future__ import annotations

from django.urls import path

from sessions_app.agent_ws.consumer import AgentConsumer
from sessions_app.dashboard.consumers import DashboardListConsumer, DashboardSessionConsumer

websocket_urlpatterns = [
    path("ws/agent/", AgentConsumer.as_asgi()),
    path("ws/dashboard/", DashboardListConsumer.as_asgi()),
    path("ws/dashboard/sessions/<uuid:session_id>/", DashboardSessionConsumer.as_asgi()),
]
