"""The MCP views' URLs (`FeatureDashboard.urls`): included at the dashboard's root, so their
names join `dashboard:`."""

from __future__ import annotations

from django.urls import path

from memory_app.mcp.dashboard import views

urlpatterns = [
    path("agents/<int:agent_id>/mcp/", views.mcp_server_edit, name="mcp_server_edit"),
    path("agents/<int:agent_id>/mcp/<str:name>/remove/", views.mcp_server_remove, name="mcp_server_remove"),
]
