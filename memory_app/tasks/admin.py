"""Tasks in the Django admin: read-only (they change only through the agent's tools)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from memory_app.tasks.models import Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("name", "session", "status", "collapsed_messages", "started_at", "ended_at")
    list_filter = ("status",)
    search_fields = ("name", "summary", "session__id")
    readonly_fields = [f.name for f in Task._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        return False
