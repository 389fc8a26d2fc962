"""Observations in the Django admin: read-only (a stored tool result is a record), deletable.

Chunks are not shown inline: a 100 MB observation has 1,600 of them. `memory_app/admin.py`
imports this module (Django's admin autodiscovery imports that one).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from memory_app.observations.models import Observation, ObservationChunk
from sessions_app.admin_base import ReadOnlyAdmin


@admin.register(Observation)
class ObservationAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "step", "tool_name", "kind", "size_bytes", "created_at", "expires_at"]
    list_filter = ["kind", "tool_name"]
    search_fields = ["id", "session__id", "tool_use_id"]
    exclude = ["session", "turn"]
    readonly_fields = [
        "id",
        "session_id",
        "turn_id",
        "step",
        "tool_name",
        "tool_use_id",
        "kind",
        "content_is_json",
        "size_bytes",
        "char_count",
        "line_count",
        "sha256",
        "chunk_size",
        "summary",
        "metadata",
        "created_at",
        "expires_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ObservationChunk)
class ObservationChunkAdmin(ReadOnlyAdmin):
    """Where each stored piece of an observation starts; the content itself is read through the
    observation (slices), never loaded whole here."""

    list_display = ["observation", "index", "start_char", "start_byte", "start_line", "end_line"]
    search_fields = ["observation__id"]
    fields = readonly_fields = ("observation", "index", "start_char", "start_byte", "start_line", "end_line")

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("text", "data")
