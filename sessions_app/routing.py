from __future__ import annotations

from django.urls import path

from sessions_app.consumers import AgentConsumer

websocket_urlpatterns = [
    path("ws/agent/", AgentConsumer.as_asgi()),
]
